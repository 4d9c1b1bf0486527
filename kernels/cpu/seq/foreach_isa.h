// The sequence kernels' per-ISA passes (kernels/cpu/foreach_isa.h) in dlb::cpu::seq, each with
// vmath.inc's vexp/vtanh/vsigmoid. An op file holds its once-only part and its bodies, and
// includes itself:
//
//   #ifndef DLB_ISA_PASS
//   ...includes, fp64 reference...
//   #define DLB_ISA_INCLUDE "kernels/cpu/seq/OP.cpp"
//   #include "kernels/cpu/seq/foreach_isa.h"     // the bodies, 3x: scalar::, avx2::, avx512::
//   ...dispatch: DLB_ISA_PICK(body)(args) calls the body of isa_active()...
//   #else
//   ...bodies: plain functions over V (V::L floats a vector)...
//   #endif
#define DLB_ISA_NAMESPACE dlb::cpu::seq
#define DLB_ISA_PRELUDE "kernels/cpu/seq/vmath.inc"
#include "kernels/cpu/foreach_isa.h"
