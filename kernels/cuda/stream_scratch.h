// Device scratch kept per (device, stream): buffers that a library call or an autocast path needs on
// every call, that two streams must not share (kernels on both would race on them), and that a CUDA
// graph replays by the pointer it captured. Its users, one slot each:
//   cublas_workspace  cuBLAS's workspace under DLB_CUBLAS_WORKSPACE=1 (handles.cpp), fixed size
//   half_a, half_b    gemm_f32's fp16/bf16 copies of op(A), op(B) (cublas_gemm.cpp), grown to the
//                     largest GEMM seen on the stream (gpt2-124m at B=4, T=1024: the logits'
//                     gradient, 4096 x 50304 halves = 412 MB)
// One policy for all of them:
// - allocated through device_alloc, so current_device_bytes and a case's peak count them;
// - grown only outside capture: a slot that must grow while its stream is captured throws with the
//   caller's reason (a capture cannot record an allocation, and a replay would use the old pointer);
//   a graph therefore needs one eager step of its largest shapes first, which every trainer runs;
// - a slot that grows waits for its stream, then frees the old buffer (no kernel still reads it);
// - released with the stream: cuda::Stream's destructor calls release_stream_scratch, so a case's
//   peak does not carry the previous case's buffers. Raw streams (the legacy default stream,
//   NCCL's) keep theirs for the process: a few. Nothing is evicted while its stream lives, since a
//   graph captured on that stream may still replay the pointer.
// Thread-safe (one mutex); the pointer stays valid until the slot grows or the stream is released.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace dlb::cuda {

enum class ScratchSlot { cublas_workspace, half_a, half_b };
constexpr int kScratchSlots = 3;

// At least `bytes` of `slot` for `stream` on the current device (nullptr for 0 bytes). Throws
// std::runtime_error(why_not_in_capture) if it must allocate while `stream` is being captured;
// OutOfMemory if the device has no room.
void* stream_scratch(cudaStream_t stream, ScratchSlot slot, std::size_t bytes, const char* why_not_in_capture);

// Frees every slot `stream` holds on any device, after waiting for the stream; a no-op without one.
void release_stream_scratch(cudaStream_t stream) noexcept;

}  // namespace dlb::cuda
