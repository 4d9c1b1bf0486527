// Shared by the files of kernels/cpu/onednn/ only (built with oneDNN): the engine and stream every
// primitive uses (oneDNN's ISA capped by ours on first use), the plain <-> oneDNN layout Tensor, and
// the guard around building a primitive. Not part of the public API (onednn.h, rnn.h).
#pragma once
#ifdef DLB_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <string>

namespace dlb::cpu::onednn::detail {

dnnl::engine& engine();
dnnl::stream& stream();  // one per thread

// Builds a primitive (make) under the checks every entry point applies: room for oneDNN's JIT
// kernels under `ulimit -v`, and its errors as dlb::OutOfMemory / dlb::Unsupported naming `key`.
void build_guarded(const std::string& key, const std::function<void()>& make);
void note_impl(const std::string& impl);  // what last_impl() reports

using dnnl::memory;

// One tensor of an entry: the caller's plain layout, and (when oneDNN wants another) a buffer in
// its layout plus the reorder between them.
struct Tensor {
  memory::desc user, prim;
  bool reordered = false;
  memory prim_mem;
  dnnl::reorder to_prim, from_prim;
  void init(const memory::desc& u, const memory::desc& p, bool input) {
    user = u, prim = p;
    reordered = !(u == p);
    if (!reordered) return;
    prim_mem = memory(p, engine());
    memory um(u, engine(), DNNL_MEMORY_NONE);
    if (input) to_prim = dnnl::reorder(um, prim_mem);
    else from_prim = dnnl::reorder(prim_mem, um);
  }
  // The memory the primitive reads (input) or writes (output); inputs are reordered here.
  memory before(const void* p, bool input) {
    memory um(user, engine(), const_cast<void*>(p));
    if (!reordered) return um;
    if (input) to_prim.execute(stream(), um, prim_mem);
    return prim_mem;
  }
  void after(void* p) {
    if (!reordered) return;
    memory um(user, engine(), p);
    from_prim.execute(stream(), prim_mem, um);
  }
};

}  // namespace dlb::cpu::onednn::detail
#endif
