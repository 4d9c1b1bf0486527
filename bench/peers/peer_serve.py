"""What the serving PyTorch peers share (pytorch_seq.py, pytorch_infer.py): dlbench's fp32 on a GPU,
the timed op=infer calls and the loop that answers dlbench's request lines. Imported from the script's own folder."""
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


def timed_calls(torch, dev, k, call):
    """`k` calls of `call()` under torch.no_grad(), each timed from an idle device to its
    synchronize (op=infer's latencies, in seconds)."""
    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    lat = []
    with torch.no_grad():
        for _ in range(k):
            sync()
            t0 = time.perf_counter()
            call()
            sync()
            lat.append(time.perf_counter() - t0)
    return lat


def infer_handler(infer):
    """serve_lines' handler of "infer K": {"latencies": infer(K)}."""
    return lambda words: {"latencies": infer(int(words[0]))} if len(words) == 1 else None


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
