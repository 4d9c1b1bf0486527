#!/usr/bin/env python3
"""PyTorch peer of the attention suite: F.scaled_dot_product_attention on the tensors dlbench wrote.

--dir DIR holds q.bin, k.bin, v.bin, g.bin (dO), raw little-endian fp32 [B, H, T, D], the same
seeded inputs as ours (rounded to bf16 when --dtype bf16, so the cast here is exact). After an
untimed warm-up the peer writes what it computed from them into DIR: o.bin (forward), and for
--pass backward dq.bin, dk.bin, dv.bin (fp32, same layout); dlbench checks them against fp64 on
sampled rows, the check its own kernels pass. Then {"ready": true, "keys": {"sdpa_backend": ...}} and, per
line "calls" on stdin, --calls timed calls as one JSON line {"seconds", "calls", "loss"}.
A backward call is backward alone (the graph kept: retain_graph), as our backward cases time it.
The backend: FlashAttention's when torch takes it for these inputs (torch.nn.attention.sdpa_kernel
with SDPBackend.FLASH_ATTENTION), else torch's default choice; "sdpa_backend" says which.
Exit 3 (one line) when torch does not import or the device is missing; 2 for bad arguments."""
import argparse
import json
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 - any import failure means "unavailable"
    print(f"torch does not import: {e}")
    sys.exit(3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    for k in ("batch", "heads", "seq", "head-dim"):
        ap.add_argument(f"--{k}", type=int, required=True)
    ap.add_argument("--causal", type=int, choices=[0, 1], default=1)
    ap.add_argument("--pass", dest="pass_", choices=["forward", "backward"], default="forward")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--calls", type=int, default=1, help="timed calls per repetition")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: every core)")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    shape = (a.batch, a.heads, a.seq, a.head_dim)
    if min(shape) <= 0 or a.calls <= 0:
        print(f"bad shape {shape} or calls {a.calls}")
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch has no CUDA device")
        return 3
    dev = torch.device(a.device)
    torch.set_num_threads(a.threads or (os.cpu_count() or 1))
    math = {}
    if dev.type == "cuda":  # dlbench's fp32 is plain FP32
        torch.backends.cuda.matmul.allow_tf32 = False
        math = {"cuda_matmul_allow_tf32": False}
    dt = torch.float32 if a.dtype == "fp32" else torch.bfloat16

    def load(name):
        x = np.fromfile(os.path.join(a.dir, name), dtype="<f4")
        if x.size != np.prod(shape):
            raise ValueError(f"{name}: {x.size} floats, expected {np.prod(shape)}")
        return torch.from_numpy(x.reshape(shape)).to(dev, dt)

    try:
        q, k, v, g = (load(n) for n in ("q.bin", "k.bin", "v.bin", "g.bin"))
    except (OSError, ValueError) as e:
        print(e)
        return 2
    bwd = a.pass_ == "backward"
    for t in (q, k, v):
        t.requires_grad_(bwd)

    def attend():
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(a.causal))

    backend = "default"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            attend()
        ctx = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # noqa: E731
        backend = "flash_attention"
    except Exception:  # noqa: BLE001 - flash refused these inputs (or an older torch): torch's choice
        import contextlib
        ctx = contextlib.nullcontext

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    with ctx():
        o = attend()
        if bwd:
            o.backward(g, retain_graph=True)

        def save(name, t):
            t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tofile(os.path.join(a.dir, name))

        save("o.bin", o)
        if bwd:
            for name, t in (("dq.bin", q), ("dk.bin", k), ("dv.bin", v)):
                save(name, t.grad)

        def call():
            nonlocal o
            if bwd:
                for t in (q, k, v):
                    t.grad = None
                o.backward(g, retain_graph=True)
            else:
                o = attend()

        call()  # warm-up
        sync()
        info = {"torch": torch.__version__, "device": a.device, "dtype": a.dtype, "keys": {"sdpa_backend": backend},
                "threads": torch.get_num_threads(), "math": math}

        def rep():
            t0 = time.perf_counter()
            for _ in range(a.calls):
                call()
            sync()
            s = time.perf_counter() - t0
            out = (q.grad if bwd else o).detach().float()
            print(json.dumps({**info, "seconds": s, "calls": a.calls, "loss": float(out.abs().mean()),
                              "loss_read": "repetition", "cpu_seconds": time.process_time()}), flush=True)

        if a.serve:
            print(json.dumps({**info, "ready": True, "cpu_seconds": time.process_time()}), flush=True)
            for line in sys.stdin:
                if line.strip() == "calls":
                    rep()
            return 0
        rep()
    return 0


if __name__ == "__main__":
    sys.exit(main())
