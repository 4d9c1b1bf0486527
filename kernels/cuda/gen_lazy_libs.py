#!/usr/bin/env python3
"""Writes kernels/cuda/lazy_libs.cpp: one forwarding definition per cuBLAS/cuBLASLt/cuDNN/NVRTC/NCCL function
dlbench calls, each resolving the real function on its first call (kernels/cuda/lazy_loader.cpp), so
the binary does not need these libraries mapped before main (issue 13: CPU-only commands under ulimit -v).

Prototypes are read from the installed headers; the compiler then checks every definition against the
header's own declaration (an extern "C" function cannot be declared twice with different types).

Usage: gen_lazy_libs.py [CUDA_INCLUDE_DIR]   (default /usr/local/cuda/include)
To add a function: add its exported name (after cublas_v2.h's macros: cublasCreate -> cublasCreate_v2)
to NAMES below and rerun; `nm -D --undefined-only build/bin/dlbench` lists what the binary still
wants from a shared library.
"""
import os
import re
import sys

# library enum value in lazy_libs.h -> (headers to read, exported names we call)
NAMES = {
    "cublas": (["cublas_api.h"], """
        cublasCreate_v2 cublasDestroy_v2 cublasSetStream_v2 cublasSetMathMode cublasSetWorkspace_v2 cublasGetProperty
        cublasGetStatusName cublasSgemm_v2 cublasGemmEx cublasSgemmStridedBatched cublasSgeam cublasSaxpy_v2"""),
    "cublaslt": (["cublasLt.h"], "cublasLtCreate cublasLtDestroy"),
    "cudnn": (["cudnn_graph.h", "cudnn_ops.h", "cudnn_cnn.h", "cudnn_adv.h"], """
        cudnnGetVersion cudnnGetErrorString cudnnGetLastErrorString cudnnCreate cudnnDestroy cudnnSetStream cudnnGetStream
        cudnnCreateTensorDescriptor cudnnSetTensor4dDescriptor cudnnDestroyTensorDescriptor
        cudnnCreateFilterDescriptor cudnnSetFilter4dDescriptor cudnnDestroyFilterDescriptor
        cudnnCreateConvolutionDescriptor cudnnSetConvolution2dDescriptor cudnnSetConvolutionMathType
        cudnnDestroyConvolutionDescriptor cudnnGetConvolution2dForwardOutputDim
        cudnnGetConvolutionForwardWorkspaceSize cudnnGetConvolutionBackwardDataWorkspaceSize
        cudnnGetConvolutionBackwardFilterWorkspaceSize cudnnFindConvolutionForwardAlgorithmEx
        cudnnFindConvolutionBackwardDataAlgorithmEx cudnnFindConvolutionBackwardFilterAlgorithmEx
        cudnnConvolutionForward cudnnConvolutionBackwardData cudnnConvolutionBackwardFilter
        cudnnConvolutionBackwardBias cudnnAddTensor
        cudnnSetTensorNdDescriptor cudnnCreateDropoutDescriptor cudnnSetDropoutDescriptor
        cudnnDestroyDropoutDescriptor cudnnCreateRNNDescriptor cudnnDestroyRNNDescriptor cudnnSetRNNDescriptor_v8
        cudnnGetRNNWeightSpaceSize cudnnGetRNNWeightParams cudnnGetRNNTempSpaceSizes cudnnCreateRNNDataDescriptor
        cudnnDestroyRNNDataDescriptor cudnnSetRNNDataDescriptor cudnnRNNForward cudnnRNNBackwardData_v8
        cudnnRNNBackwardWeights_v8
        cudnnBackendCreateDescriptor cudnnBackendDestroyDescriptor cudnnBackendSetAttribute
        cudnnBackendGetAttribute cudnnBackendFinalize cudnnBackendExecute"""),
    # cudnn-frontend (kernels/cuda/seq/attention_cudnn.cpp) references NVRTC for an experimental sm100
    # engine its plans.h always includes; the SDPA graphs never call it, but the link wants the names.
    "nvrtc": (["nvrtc.h"], """
        nvrtcCreateProgram nvrtcDestroyProgram nvrtcCompileProgram nvrtcGetProgramLogSize nvrtcGetProgramLog
        nvrtcGetCUBINSize nvrtcGetCUBIN"""),
    # kernels/comm (suite dist); compiled only where nccl.h exists.
    "nccl": (["nccl.h"], """
        ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclGetErrorString
        ncclAllReduce ncclAllGather ncclReduceScatter ncclBroadcast"""),
}


def clean(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)  # preprocessor lines
    return re.sub(r"\s+", " ", text)


def declaration(text, name):
    """(return type, parameter list) of the first plain declaration `RET name(PARAMS);`."""
    for m in re.finditer(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"\s*\(", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if not text[i:].lstrip().startswith(";"):
            continue  # a definition or a macro use
        start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
        prefix = text[start:m.start()].replace('extern "C"', " ").split()
        if "static" in prefix or "inline" in prefix or "typedef" in prefix:
            continue
        ret = " ".join(t for t in prefix if not re.fullmatch(r"[A-Z0-9_]+", t))
        return ret, text[m.end():i - 1].strip()
    raise SystemExit(f"gen_lazy_libs: no declaration of {name} found")


def arg_names(params):
    if params in ("", "void"):
        return []
    names, depth, cur = [], 0, ""
    for ch in params + ",":
        if ch == "," and depth == 0:
            ident = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\[[^\]]*\]", "", cur))
            if not ident:
                raise SystemExit(f"gen_lazy_libs: unnamed parameter in ({params})")
            names.append(ident[-1])
            cur = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        cur += ch
    return names


def main():
    inc = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include"
    out = ["// GENERATED by kernels/cuda/gen_lazy_libs.py from the CUDA/cuDNN/NCCL headers; do not edit.",
           "// Each function resolves the real one from its library on the first call (lazy_loader.cpp).",
           "// NOLINTBEGIN",
           "#include <cublasLt.h>", "#include <cublas_v2.h>", "#include <cudnn.h>", "#include <nvrtc.h>", "",
           '#include "kernels/cuda/lazy_libs.h"', "",
           "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"", ""]
    table = []
    for lib, (headers, names) in NAMES.items():
        text = clean("".join(open(os.path.join(inc, h)).read() for h in headers))
        guard = lib == "nccl"
        if guard:
            out += ["#if __has_include(<nccl.h>)", "#include <nccl.h>"]
            table.append("#if __has_include(<nccl.h>)")
        for name in names.split():
            ret, params = declaration(text, name)
            args = ", ".join(arg_names(params))
            out += [f'extern "C" {ret} {name}({params}) {{',
                    f"  using Fn = {ret}({params});",
                    f"  static const auto real = reinterpret_cast<Fn*>(",
                    f'      dlb::cuda::lazy_symbol(dlb::cuda::LazyLib::{lib}, "{name}"));',
                    f"  return real({args});", "}"]
            table.append(f'    {{dlb::cuda::LazyLib::{lib}, "{name}"}},')
        if guard:
            out.append("#endif")
            table.append("#endif")
        out.append("")
    out += ["namespace dlb::cuda {", "const std::vector<LazySymbolEntry>& lazy_symbols() {",
            "  static const std::vector<LazySymbolEntry> v = {"] + table + [
            "  };", "  return v;", "}", "}  // namespace dlb::cuda", "// NOLINTEND", ""]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "lazy_libs.cpp"), "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
