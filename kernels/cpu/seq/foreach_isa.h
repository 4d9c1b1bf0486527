// Compiles an op's kernel bodies once per ISA level, from one text written over the vector type V
// (kernels/cpu/simd.h): Highway's foreach_target idea with our width traits. An op file holds both
// its once-only part and its bodies, and includes itself through this header:
//
//   #ifndef DLB_ISA_PASS
//   ...includes, fp64 reference...
//   #define DLB_ISA_INCLUDE "kernels/cpu/seq/OP.cpp"
//   #include "kernels/cpu/seq/foreach_isa.h"     // the bodies, 3x: scalar::, avx2::, avx512::
//   ...dispatch: DLB_ISA_PICK(body)(args) calls the body of isa_active()...
//   #else
//   ...bodies: plain functions over V (V::L floats a vector) and vmath.inc's vexp/vtanh/vsigmoid...
//   #endif
//
// Each pass sits in an anonymous namespace (bodies of different ops never collide at link time)
// between target pragmas, so the always_inline intrinsics of simd.h inline into it. Bodies are
// single-threaded; the dispatch splits work over the kernel threads, outside the target regions.
#ifndef DLB_ISA_INCLUDE
#error "define DLB_ISA_INCLUDE (the op file itself) before including foreach_isa.h"
#endif
#define DLB_ISA_PASS 1
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_* vectors and warn where they inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace dlb::cpu::seq {
namespace {
namespace scalar {
using V = simd::Scalar;
#include "kernels/cpu/seq/vmath.inc"
#include DLB_ISA_INCLUDE
}  // namespace scalar
}  // namespace
}  // namespace dlb::cpu::seq

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)  // = DLB_TARGET_AVX2
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")  // = DLB_TARGET_AVX2
#endif
namespace dlb::cpu::seq {
namespace {
namespace avx2 {
using V = simd::Avx2;
#include "kernels/cpu/seq/vmath.inc"
#include DLB_ISA_INCLUDE
}  // namespace avx2
}  // namespace
}  // namespace dlb::cpu::seq
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,fma")  // = DLB_TARGET_AVX512
#endif
namespace dlb::cpu::seq {
namespace {
namespace avx512 {
using V = simd::Avx512;
#include "kernels/cpu/seq/vmath.inc"
#include DLB_ISA_INCLUDE
}  // namespace avx512
}  // namespace
}  // namespace dlb::cpu::seq
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
// The body `fn` for the ISA level in force (isa.h: the CPU, DLB_CPU_ISA, IsaLimit).
#define DLB_ISA_PICK(fn)                                                  \
  (::dlb::cpu::isa_allows(::dlb::cpu::Isa::avx512) ? &avx512::fn          \
   : ::dlb::cpu::isa_allows(::dlb::cpu::Isa::avx2) ? &avx2::fn : &scalar::fn)
#else
#define DLB_ISA_PICK(fn) (&scalar::fn)
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef DLB_ISA_PASS
#undef DLB_ISA_INCLUDE
