// NVTX ranges (see kernels/common/nvtx.h). Never run under nsys here (no GPU on the build machine).
#include "kernels/common/nvtx.h"

#include <nvtx3/nvToolsExt.h>

namespace dlb {

void nvtx_push(const std::string& name) { nvtxRangePushA(name.c_str()); }
void nvtx_pop() { nvtxRangePop(); }

}  // namespace dlb
