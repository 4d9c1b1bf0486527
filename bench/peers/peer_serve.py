"""What the serving PyTorch peers share (pytorch_seq.py, pytorch_infer.py): dlbench's fp32 on a GPU,
and the loop that answers dlbench's request lines. Imported from the script's own folder."""
import json
import sys
import time


def fp32_math(torch, dev):
    """dlbench's fp32 on a CUDA device: no TF32 in matmul or cuDNN, and cuDNN picks its algorithms by
    benchmarking, as dlbench searches them. Returns what it set (the records' torch_math)."""
    if dev.type != "cuda":
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return {"cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": False, "cudnn_benchmark": True}


def serve_lines(info, handlers):
    """Per line on stdin, its first word picks a handler (given the other words) whose dict is
    printed as one JSON record with `info` and the process's CPU time so far; other lines are
    passed over. Returns at the end of stdin."""
    for line in sys.stdin:
        words = line.split()
        handler = handlers.get(words[0]) if words else None
        out = handler(words[1:]) if handler else None
        if out is not None:
            print(json.dumps({**info, **out, "cpu_seconds": time.process_time()}), flush=True)
