#!/usr/bin/env python3
"""PyTorch peer of the gpt2 model: GPT-2 in plain PyTorch (pre-LN blocks, causal attention through
F.scaled_dot_product_attention, GELU(tanh), learned positions, the token embedding tied to the LM
head, AdamW), loading the llm.c checkpoint dlbench writes (models/gpt2_files.h: 256-int32 header,
16 fp32 tensors in llm.c's order) and training on an llm.c token file, batches as llm.c's loader
cuts them (x = tokens[p : p + B T], y = the same shifted by one).

Modes (--mode): eager, or compile (torch.compile of the model). --autocast bf16: the timed steps'
forward under torch.autocast(bfloat16), PyTorch's AMP (the parity run stays fp32).
--checkpoint-activations: each block through torch.utils.checkpoint (its activations recomputed in
backward).
--infer prefill|decode (with --serve): batch 1 inference with a per-layer K/V cache, eval, no_grad:
one call per line "infer" on stdin, answered {"latencies": [seconds]}: prefill = the --seq-token
prompt into an empty cache (the last position's logits), decode = one token after it (the cache
refilled with the prompt, untimed, after --decode-steps tokens). Before its ready line it checks every
prefilled and decoded position's logits against the full forward's (ready's "kv_check_rel": max |diff|
over max |logit|).
--parity DIR: the parity check with dlbench's step, same weights, same batch each step:
  DIR/logits.bin   the logits of step 1's forward, [B, T, Vp] fp32 (the padded columns too)
  DIR/grads.bin    every gradient after step 1's backward, written as an llm.c checkpoint (same
                   header, the 16 gradient tensors in llm.c's order; wte's holds the LM head's share)
  stdout           one JSON line {"loss": step 1's loss, "losses": the loss of each of --parity-steps
                   AdamW steps (default 10)}
Otherwise timed steps: --steps per repetition, --reps repetitions (or, with --serve, one repetition
per line "steps" on stdin after a {"ready": true} line), each printed as one JSON line {"seconds",
"steps", "tokens_per_s", "loss", "cpu_seconds", ...}. The loss is read once per repetition.
The loss is the mean cross-entropy over the V real classes (the padded logits take no part), as in
llm.c. AdamW is torch.optim.AdamW(lr, betas (0.9, 0.999), eps 1e-8, weight_decay): with foreach=False
in the parity run (the single-tensor formula dlbench's adamw_step follows), with PyTorch's default in
the timed steps (the multi-tensor path on CUDA, single-tensor on the CPU: what a user's eager loop
gets; the records' torch_adamw); llm.c's defaults: lr 1e-4, no decay.
Exit 3 (one line) when torch does not import; 2 for bad arguments or files."""
import argparse
import json
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint
except Exception as e:  # noqa: BLE001 - any import failure means "unavailable"
    print(f"torch does not import: {e}")
    sys.exit(3)

NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


def shapes(cfg):
    vp, t, l, c = cfg["padded_vocab_size"], cfg["max_seq_len"], cfg["num_layers"], cfg["channels"]
    return [(vp, c), (t, c), (l, c), (l, c), (l, 3 * c, c), (l, 3 * c), (l, c, c), (l, c),
            (l, c), (l, c), (l, 4 * c, c), (l, 4 * c), (l, c, 4 * c), (l, c), (c,), (c,)]


def read_checkpoint(path):
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        if head.size != 256 or head[0] != 20240326 or head[1] != 3:
            raise ValueError(f"{path}: not an llm.c fp32 checkpoint (magic/version)")
        cfg = dict(max_seq_len=int(head[2]), vocab_size=int(head[3]), num_layers=int(head[4]),
                   num_heads=int(head[5]), channels=int(head[6]), padded_vocab_size=int(head[7]))
        flat = np.frombuffer(f.read(), dtype="<f4")
    tensors, off = [], 0
    for s in shapes(cfg):
        n = int(np.prod(s))
        if off + n > flat.size:
            raise ValueError(f"{path}: truncated")
        tensors.append(torch.from_numpy(flat[off:off + n].copy()).view(*s))
        off += n
    if off != flat.size:
        raise ValueError(f"{path}: oversized")
    return cfg, tensors


def write_checkpoint(path, cfg, tensors):
    head = np.zeros(256, dtype="<i4")
    head[:8] = [20240326, 3, cfg["max_seq_len"], cfg["vocab_size"], cfg["num_layers"], cfg["num_heads"],
                cfg["channels"], cfg["padded_vocab_size"]]
    with open(path, "wb") as f:
        f.write(head.tobytes())
        for t in tensors:
            f.write(t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tobytes())


def read_tokens(path):
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        if head.size != 256 or head[0] != 20240520 or head[1] != 1:
            raise ValueError(f"{path}: not an llm.c token file (magic/version)")
        toks = np.frombuffer(f.read(), dtype="<u2")
    if toks.size != head[2]:
        raise ValueError(f"{path}: the header declares {head[2]} tokens, the file holds {toks.size}")
    return toks.astype(np.int64)


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    def forward_cached(self, x, kc, vc, pos):
        """x: the new positions [1, t, c] at pos..pos+t-1; kc, vc [1, h, max, d] take their keys and
        values. A prompt (t > 1) goes into an empty cache (pos 0, causal); one token sees them all."""
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        kc[:, :, pos:pos + t] = k
        vc[:, :, pos:pos + t] = v
        y = F.scaled_dot_product_attention(q, kc[:, :, :pos + t], vc[:, :, :pos + t], is_causal=t > 1)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["channels"]
        self.v = cfg["vocab_size"]
        self.wte = nn.Embedding(cfg["padded_vocab_size"], c)
        self.wpe = nn.Embedding(cfg["max_seq_len"], c)
        self.h = nn.ModuleList(Block(c, cfg["num_heads"]) for _ in range(cfg["num_layers"]))
        self.ln_f = nn.LayerNorm(c)
        self.ckpt = False  # --checkpoint-activations

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.h:
            x = checkpoint(blk, x, use_reentrant=False) if self.ckpt and self.training else blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the tied LM head, over Vp columns
        loss = F.cross_entropy(logits[..., :self.v].reshape(-1, self.v), targets.reshape(-1))
        return logits, loss

    def forward_cached(self, idx, caches, pos, last):
        """Logits over the V real classes of the new tokens idx [1, t] at pos.. (only the last's when
        `last`), their keys and values added to caches (one (k, v) per block)."""
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(pos, pos + t, device=idx.device))
        for blk, (kc, vc) in zip(self.h, caches):
            x = blk.forward_cached(x, kc, vc, pos)
        return F.linear(self.ln_f(x[:, -1:] if last else x), self.wte.weight[:self.v])

    # llm.c's 16 tensors <-> this module's parameters (the per-layer ones stacked over the blocks).
    def per_layer(self):
        return [("ln1w", lambda b: b.ln_1.weight), ("ln1b", lambda b: b.ln_1.bias),
                ("qkvw", lambda b: b.c_attn.weight), ("qkvb", lambda b: b.c_attn.bias),
                ("attprojw", lambda b: b.attn_proj.weight), ("attprojb", lambda b: b.attn_proj.bias),
                ("ln2w", lambda b: b.ln_2.weight), ("ln2b", lambda b: b.ln_2.bias),
                ("fcw", lambda b: b.c_fc.weight), ("fcb", lambda b: b.c_fc.bias),
                ("fcprojw", lambda b: b.mlp_proj.weight), ("fcprojb", lambda b: b.mlp_proj.bias)]

    @torch.no_grad()
    def load_llmc(self, tensors):
        t = dict(zip(NAMES, tensors))
        self.wte.weight.copy_(t["wte"])
        self.wpe.weight.copy_(t["wpe"])
        for name, get in self.per_layer():
            for i, blk in enumerate(self.h):
                get(blk).copy_(t[name][i])
        self.ln_f.weight.copy_(t["lnfw"])
        self.ln_f.bias.copy_(t["lnfb"])

    def grads_llmc(self):
        out = {"wte": self.wte.weight.grad, "wpe": self.wpe.weight.grad,
               "lnfw": self.ln_f.weight.grad, "lnfb": self.ln_f.bias.grad}
        for name, get in self.per_layer():
            out[name] = torch.stack([get(b).grad for b in self.h])
        return [out[n] for n in NAMES]


def serve_infer(a, cfg, toks, model, dev, info):
    n = a.seq + a.decode_steps
    if not 0 < a.seq <= n <= cfg["max_seq_len"] or toks.size < n or a.decode_steps < 0:
        print(f"--infer: seq {a.seq} + {a.decode_steps} decode steps must fit {cfg['max_seq_len']} positions "
              f"and {toks.size} tokens")
        return 2
    model.eval()
    idx = torch.from_numpy(toks[:n]).view(1, n).to(dev)
    d = cfg["channels"] // cfg["num_heads"]
    caches = [(torch.zeros(1, cfg["num_heads"], n, d, device=dev), torch.zeros(1, cfg["num_heads"], n, d, device=dev))
              for _ in model.h]
    with torch.no_grad():
        full = model(idx, idx)[0][0, :, :model.v]
        got = [model.forward_cached(idx[:, :a.seq], caches, 0, last=False)[0]]
        got += [model.forward_cached(idx[:, t:t + 1], caches, t, last=True)[0] for t in range(a.seq, n)]
        rel = ((torch.cat(got) - full).abs().max() / full.abs().max().clamp_min(1e-12)).item()
    state = {"pos": 0}

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    @torch.no_grad()
    def call():
        if a.infer == "decode" and not a.seq <= state["pos"] < n:  # (re)fill the cache with the prompt
            model.forward_cached(idx[:, :a.seq], caches, 0, last=True)
            state["pos"] = a.seq
        sync()
        t0 = time.perf_counter()
        if a.infer == "prefill":
            model.forward_cached(idx[:, :a.seq], caches, 0, last=True)
        else:
            model.forward_cached(idx[:, state["pos"]:state["pos"] + 1], caches, state["pos"], last=True)
            state["pos"] += 1
        sync()
        return time.perf_counter() - t0

    for _ in range(a.warmup):
        call()
    info = {**info, "infer": a.infer, "decode_steps": a.decode_steps, "kv_check_rel": rel}
    print(json.dumps({**info, "ready": True, "cpu_seconds": time.process_time()}), flush=True)
    for line in sys.stdin:
        if line.strip() == "infer":
            print(json.dumps({"latencies": [call()], "cpu_seconds": time.process_time()}), flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="llm.c checkpoint (dlbench data make gpt2)")
    ap.add_argument("--tokens", required=True, help="llm.c token file")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--parity", help="folder for logits.bin and grads.bin; prints the losses")
    ap.add_argument("--parity-steps", type=int, default=10)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per repetition")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: every core)")
    ap.add_argument("--serve", action="store_true", help="one repetition per line 'steps' on stdin")
    ap.add_argument("--checkpoint-activations", action="store_true", help="torch.utils.checkpoint per block")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="timed steps under torch.autocast(bfloat16): matmuls and SDPA in bf16, as AMP runs them")
    ap.add_argument("--infer", choices=["prefill", "decode"], help="K/V-cache inference at batch 1 (with --serve)")
    ap.add_argument("--decode-steps", type=int, default=64, help="--infer: tokens decoded after the prompt")
    a = ap.parse_args()
    try:
        cfg, tensors = read_checkpoint(a.checkpoint)
        toks = read_tokens(a.tokens)
    except (OSError, ValueError) as e:
        print(e)
        return 2
    if not a.infer and (a.batch <= 0 or not 0 < a.seq <= cfg["max_seq_len"] or toks.size < a.batch * a.seq + 1):
        print(f"batch {a.batch} x seq {a.seq}: needs 0 < seq <= {cfg['max_seq_len']} and "
              f"{a.batch * a.seq + 1} tokens ({toks.size} in the file)")
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch has no CUDA device")
        return 3
    if int(toks.max()) >= cfg["vocab_size"]:
        print(f"{a.tokens}: token {int(toks.max())} outside the vocabulary of {cfg['vocab_size']}")
        return 2
    dev = torch.device(a.device)
    math = {}
    if dev.type == "cuda":  # dlbench's fp32 is plain FP32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        math = {"cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": False}
    torch.set_num_threads(a.threads or (os.cpu_count() or 1))
    model = GPT2(cfg)
    model.load_llmc(tensors)
    model.to(dev)
    model.ckpt = a.checkpoint_activations
    if a.infer:
        return serve_infer(a, cfg, toks, model, dev, {"torch": torch.__version__, "device": a.device, "seq": a.seq,
                                                      "threads": torch.get_num_threads(), "math": math})
    n = a.batch * a.seq
    x = torch.from_numpy(toks[:n]).view(a.batch, a.seq).to(dev)
    y = torch.from_numpy(toks[1:n + 1]).view(a.batch, a.seq).to(dev)
    step_fn = torch.compile(model) if a.mode == "compile" else model

    def adamw(parity):
        return torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=a.weight_decay, foreach=False if parity else None)

    opt = adamw(bool(a.parity))

    amp = a.autocast == "bf16" and not a.parity  # (the parity run is fp32: it checks the model, not AMP)

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            logits, loss = step_fn(x, y)
        loss.backward()
        return logits, loss

    if a.parity:
        os.makedirs(a.parity, exist_ok=True)
        logits, loss = step()
        logits.detach().to("cpu", torch.float32).numpy().astype("<f4").tofile(os.path.join(a.parity, "logits.bin"))
        write_checkpoint(os.path.join(a.parity, "grads.bin"), cfg, model.grads_llmc())
        losses = [loss.item()]
        opt.step()
        for _ in range(a.parity_steps - 1):
            _, loss = step()
            losses.append(loss.item())
            opt.step()
        print(json.dumps({"loss": losses[0], "losses": losses, "torch": torch.__version__, "mode": a.mode}), flush=True)
        return 0

    # Untimed warm-up (torch.compile's compilation, lazy CUDA init), then the weights and the
    # optimizer start fresh so every repetition trains the checkpoint's model.
    init = {k: v.clone() for k, v in model.state_dict().items()}
    for _ in range(a.warmup):
        step()
        opt.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    model.load_state_dict(init)
    opt = adamw(False)
    info = {"torch": torch.__version__, "device": a.device, "mode": a.mode, "batch": a.batch, "seq": a.seq,
            "threads": torch.get_num_threads(), "math": math, "params": sum(t.numel() for t in tensors),
            "keys": {"torch_adamw": "default: " + ("foreach" if dev.type == "cuda" else "single-tensor"),
                     "torch_autocast": "bf16" if amp else "none"}}

    def rep():
        t0 = time.perf_counter()
        total = torch.zeros((), device=dev)
        for _ in range(a.steps):
            _, loss = step()
            opt.step()
            total += loss.detach()
        mean = total.item() / a.steps  # the one read (a sync on CUDA)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        s = time.perf_counter() - t0
        print(json.dumps({**info, "seconds": s, "steps": a.steps, "tokens_per_s": a.steps * n / s,
                          "loss": mean, "loss_read": "repetition", "cpu_seconds": time.process_time()}), flush=True)

    if a.serve:
        print(json.dumps({**info, "ready": True, "cpu_seconds": time.process_time()}), flush=True)
        for line in sys.stdin:
            if line.strip() == "steps":
                rep()
        return 0
    for _ in range(a.reps):
        rep()
    return 0


if __name__ == "__main__":
    sys.exit(main())
