// Compiles kernel bodies once per ISA level, from one text written over the vector type V
// (kernels/cpu/simd.h): Highway's foreach_target idea with our width traits. The including file
// defines what to compile and where, then includes this header:
//
//   #define DLB_ISA_NAMESPACE dlb::cpu::seq   // the passes' namespace, relative to the include site
//   #define DLB_ISA_PRELUDE "kernels/cpu/seq/vmath.inc"       // optional: included first in each pass
//   #define DLB_ISA_INCLUDE "kernels/cpu/seq/OP.cpp"          // the bodies (often the file itself)
//   #include "kernels/cpu/foreach_isa.h"    // the bodies, 3x: scalar::, avx2::, avx512::
//   ...dispatch: DLB_ISA_PICK(body)(args) calls the body of isa_active()...
//
// The sequence kernels include themselves through kernels/cpu/seq/foreach_isa.h (which sets the
// namespace and vmath.inc); the conv direct kernels (conv2d/direct.cpp) include direct_forward.inc.
// Each pass sits in an anonymous namespace (bodies of different ops never collide at link time)
// between target pragmas (GCC's #pragma GCC target; clang's #pragma clang attribute, which the
// sanitizer build needs), so the always_inline intrinsics of simd.h inline into it. Bodies are
// single-threaded; the dispatch splits work over the kernel threads, outside the target regions.
#ifndef DLB_ISA_INCLUDE
#error "define DLB_ISA_INCLUDE (the bodies) before including foreach_isa.h"
#endif
#ifndef DLB_ISA_NAMESPACE
#error "define DLB_ISA_NAMESPACE (the passes' enclosing namespace) before including foreach_isa.h"
#endif
#define DLB_ISA_PASS 1
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_* vectors and warn where they inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace DLB_ISA_NAMESPACE {
namespace {
namespace scalar {
using V = ::dlb::cpu::simd::Scalar;
#ifdef DLB_ISA_PRELUDE
#include DLB_ISA_PRELUDE
#endif
#include DLB_ISA_INCLUDE
}  // namespace scalar
}  // namespace
}  // namespace DLB_ISA_NAMESPACE

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)  // = DLB_TARGET_AVX2
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")  // = DLB_TARGET_AVX2
#endif
namespace DLB_ISA_NAMESPACE {
namespace {
namespace avx2 {
using V = ::dlb::cpu::simd::Avx2;
#ifdef DLB_ISA_PRELUDE
#include DLB_ISA_PRELUDE
#endif
#include DLB_ISA_INCLUDE
}  // namespace avx2
}  // namespace
}  // namespace DLB_ISA_NAMESPACE
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,fma")  // = DLB_TARGET_AVX512
#endif
namespace DLB_ISA_NAMESPACE {
namespace {
namespace avx512 {
using V = ::dlb::cpu::simd::Avx512;
#ifdef DLB_ISA_PRELUDE
#include DLB_ISA_PRELUDE
#endif
#include DLB_ISA_INCLUDE
}  // namespace avx512
}  // namespace
}  // namespace DLB_ISA_NAMESPACE
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
#undef DLB_ISA_NAMESPACE
#undef DLB_ISA_PRELUDE
