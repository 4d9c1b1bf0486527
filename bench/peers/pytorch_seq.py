#!/usr/bin/env python3
"""PyTorch peer of the sequence models (seed 002): the seed's own modules -- RNNClassifier (nn.RNN,
sequence-first), LSTMGenerator (nn.LSTM, batch_first, h0/c0) and TransformerLM (nn.Transformer with
its defaults) -- trained with CrossEntropy and Adam(1e-3). Three modes:

  --parity DIR   dlbench's bundle (config.json, the initial weights params/NAME.f32, the batches
                 step_K/in_I.i32 and labels.i32): load the weights into the seed's modules, train
                 `steps` steps on those batches, write torch.json {"torch", "losses", "losses64"}
                 and the gradients torch_grads_K/NAME.f32 of the steps dlbench asked for; again in
                 float64 (torch64_grads_K: the yardstick of fp32 rounding). Dropout off (p = 0).
  --serve        throughput: after a warm-up prints {"ready": true, ...}; then per line "epoch" on
                 stdin trains ceil(samples / batch) steps on dlbench's batches (--data FILE: --steps
                 of them, little-endian int32, per step each token input [batch * seq] then the
                 labels, as dlbench's own epoch takes them; without it random tokens) and prints {"seconds",
                 "tokens_per_s", "loss", "cpu_seconds"}; per line "infer K" runs K forward passes in
                 eval mode under torch.no_grad() and prints their "latencies" (seconds each: the
                 inputs' move from host tensors to the device and the synchronize included).
Sizes: --model, --vocab, --seq, --emb, --hidden, --layers, --classes, --d-model, --heads, --mask.
Exit 3 (one line) when torch does not import; dlbench then records the peer as skipped."""
import argparse
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.nn import Transformer
except Exception as e:  # noqa: BLE001 - any import failure means "unavailable"
    print(f"torch does not import: {e}")
    sys.exit(3)

from peer_serve import fp32_math, infer_handler, serve_lines, timed_calls  # noqa: E402 - after the torch check


class RNNClassifier(nn.Module):
    """Seed 002's RNN for text classification, as written."""

    def __init__(self, vocab_size, embedding_dim, hidden_dim, num_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.rnn = nn.RNN(embedding_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        embedded = self.embedding(x)
        _, hidden = self.rnn(embedded)
        return self.fc(hidden.squeeze(0))


class LSTMGenerator(nn.Module):
    """Seed 002's LSTM for text generation, as written."""

    def __init__(self, vocab_size, embedding_dim, hidden_dim, num_layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_dim, vocab_size)

    def forward(self, x, h0, c0):
        embedded = self.embedding(x)
        output, (hn, cn) = self.lstm(embedded, (h0, c0))
        output = self.fc(output[:, -1, :])
        return output, (hn, cn)


class PositionalEncoding(nn.Module):
    """The seed uses PositionalEncoding(d_model, seq_len) without defining it: the sinusoidal table
    (computed in float64, as dlbench's), returned for the positions of a sequence-first input."""

    def __init__(self, d_model, max_len):
        super().__init__()
        pos = np.arange(max_len, dtype=np.float64)[:, None]
        div = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2, dtype=np.float64) / d_model)
        pe = np.zeros((max_len, d_model))
        pe[:, 0::2] = np.sin(pos * div)
        pe[:, 1::2] = np.cos(pos * div)[:, : d_model // 2]
        self.register_buffer("pe", torch.tensor(pe, dtype=torch.float32))

    def forward(self, x):
        return self.pe[: x.size(0)].unsqueeze(1)


class TransformerLM(nn.Module):
    """Seed 002's Transformer language model, as written (dropout and tgt_mask exposed: p = 0 for
    the parity check, the causal mask for mask=causal)."""

    def __init__(self, vocab_size, d_model, nhead, num_layers, seq_len, dropout=0.1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, seq_len)
        self.transformer = Transformer(d_model=d_model, nhead=nhead, num_encoder_layers=num_layers,
                                       num_decoder_layers=num_layers, dropout=dropout)
        self.fc = nn.Linear(d_model, vocab_size)

    def forward(self, src, tgt, tgt_mask=None):
        src = self.embedding(src) + self.pos_encoding(src)
        tgt = self.embedding(tgt) + self.pos_encoding(tgt)
        output = self.transformer(src, tgt, tgt_mask=tgt_mask)
        return self.fc(output)


def build(c, dropout):
    if c["model"] == "rnn":
        return RNNClassifier(c["vocab"], c["emb"], c["hidden"], c["classes"])
    if c["model"] == "lstm":
        return LSTMGenerator(c["vocab"], c["emb"], c["hidden"], c["layers"])
    return TransformerLM(c["vocab"], c["d_model"], c["heads"], c["layers"], c["seq"], dropout)


class Step:
    """One model's forward and loss on dlbench's batch layouts: rnn tokens [seq, n] (sequence-first,
    as the seed feeds nn.RNN); lstm tokens [n, seq] with zero h0, c0 [layers, n, hidden];
    transformer src, tgt [n, seq] (dlbench's batch-first order) transposed to nn.Transformer's
    [seq, n], its output [seq, n, vocab] read back batch-first against labels [n * seq]."""

    def __init__(self, c, net, dev):
        self.c, self.net, self.dev = c, net, dev
        self.crit = nn.CrossEntropyLoss()
        self.mask = None
        if c["model"] == "transformer" and c.get("causal"):
            self.mask = Transformer.generate_square_subsequent_mask(c["seq"], device=dev)

    def logits(self, inputs, n):
        c, T = self.c, self.c["seq"]
        if c["model"] == "rnn":
            return self.net(inputs[0].view(T, n))
        if c["model"] == "lstm":
            h0 = torch.zeros(c["layers"], n, c["hidden"], device=self.dev, dtype=self.net.fc.weight.dtype)
            return self.net(inputs[0].view(n, T), h0, h0.clone())[0]
        src, tgt = inputs[0].view(n, T).t(), inputs[1].view(n, T).t()
        out = self.net(src, tgt, self.mask)
        return out.transpose(0, 1).reshape(n * T, -1)

    def loss(self, inputs, labels, n):
        return self.crit(self.logits(inputs, n), labels)


def inputs_count(c):
    return 2 if c["model"] == "transformer" else 1


def train_bundle(d, c, dtype, tag):
    """Loads dlbench's weights into the seed's modules in `dtype`, trains c["steps"] steps on the
    bundle's batches, writes the gradients of the asked steps to DIR/<tag>_grads_K/; the losses."""
    torch.manual_seed(0)
    net = build(c, 0.0)
    state = net.state_dict()
    loaded = {}
    for name, t in state.items():
        path = os.path.join(d, "params", name + ".f32")
        if not os.path.exists(path):
            if name.endswith("pe"):
                continue  # the positional table is a buffer, not a parameter
            raise SystemExit(f"dlbench's bundle has no parameter {name}")
        a = np.fromfile(path, dtype="<f4")
        if a.size != t.numel():
            raise SystemExit(f"{name}: {a.size} values in the bundle, the module has {t.numel()}")
        loaded[name] = torch.from_numpy(a.reshape(tuple(t.shape)).copy())
    net.load_state_dict(loaded, strict=False)
    net = net.to(dtype)
    named = dict(net.named_parameters())
    missing = [k for k in named if k not in loaded]
    if missing:
        raise SystemExit(f"parameters dlbench did not write: {missing}")
    opt = torch.optim.Adam(net.parameters(), lr=c["lr"])
    step = Step(c, net, torch.device("cpu"))
    if step.mask is not None:
        step.mask = step.mask.to(dtype)
    losses = []
    for k in range(1, c["steps"] + 1):
        sd = os.path.join(d, f"step_{k}")
        ins = [torch.from_numpy(np.fromfile(os.path.join(sd, f"in_{i}.i32"), dtype="<i4").astype(np.int64))
               for i in range(inputs_count(c))]
        labels = torch.from_numpy(np.fromfile(os.path.join(sd, "labels.i32"), dtype="<i4").astype(np.int64))
        opt.zero_grad()
        loss = step.loss(ins, labels, c["batch"])
        loss.backward()
        losses.append(loss.item())
        if k in c["grad_steps"]:
            gd = os.path.join(d, f"{tag}_grads_{k}")
            os.makedirs(gd, exist_ok=True)
            for name, p in named.items():
                p.grad.detach().numpy().astype("<f4").tofile(os.path.join(gd, name + ".f32"))
        opt.step()
    return losses


def parity(d):
    """The seed's modules in fp32 (the peer dlbench is compared with) and in fp64 (how far fp32
    rounding alone takes the same training from exact: the yardstick for ours vs PyTorch's)."""
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    losses = train_bundle(d, c, torch.float32, "torch")
    losses64 = train_bundle(d, c, torch.float64, "torch64")
    with open(os.path.join(d, "torch.json"), "w") as f:
        json.dump({"torch": torch.__version__, "losses": losses, "losses64": losses64}, f)
    return 0


def serve(a):
    dev = torch.device(a.device)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch has no CUDA device")
        return 3
    math_info = fp32_math(torch, dev)
    torch.set_num_threads(a.threads or (os.cpu_count() or 1))
    c = {"model": a.model, "vocab": a.vocab, "seq": a.seq, "emb": a.emb, "hidden": a.hidden, "layers": a.layers,
         "classes": a.classes, "d_model": a.d_model, "heads": a.heads, "causal": a.mask == "causal"}
    torch.manual_seed(0)
    net = build(c, a.dropout).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    step = Step(c, net, dev)
    g = torch.Generator().manual_seed(0)
    n, T = a.batch, a.seq
    n_labels = n * T if a.model == "transformer" else n
    steps = max(1, -(-a.samples // n))
    if a.data:  # dlbench's batches: step k is batches[k % len(batches)] (an epoch of `steps`)
        per = inputs_count(c) * n * T + n_labels
        raw = np.fromfile(a.data, dtype="<i4").astype(np.int64)
        if raw.size != a.steps * per:
            raise SystemExit(f"--data {a.data}: {raw.size} values, expected {a.steps} steps of {per}")
        batches = []
        for k in range(a.steps):
            r = torch.from_numpy(raw[k * per:(k + 1) * per].copy()).to(dev)
            batches.append(([r[i * n * T:(i + 1) * n * T] for i in range(inputs_count(c))], r[per - n_labels:]))
    else:
        ins = [torch.randint(0, a.vocab, (n * T,), generator=g).to(dev) for _ in range(inputs_count(c))]
        classes = a.classes if a.model == "rnn" else a.vocab
        batches = [(ins, torch.randint(0, classes, (n_labels,), generator=g).to(dev))]
    ins = batches[0][0]

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def train(k):
        total = torch.zeros((), device=dev)
        for j in range(k):
            x, y = batches[j % len(batches)]
            opt.zero_grad()
            loss = step.loss(x, y, n)
            loss.backward()
            opt.step()
            total += loss.detach()
        return total.item() / k  # one read per epoch, as dlbench's trainers

    # infer: the inputs start on the host and are moved inside each timed call, as dlbench's GPU
    # infer_batch copies its batch in (a no-op on the CPU); the device is idle when t0 is taken.
    ins_host = [t.cpu() for t in ins]

    def infer(k):
        net.eval()
        lat = timed_calls(torch, dev, k, lambda: step.logits([t.to(dev) for t in ins_host], n))
        net.train()
        return lat

    # warm-up: lazy initialisation, the allocator's pools, cuDNN's search; then the initial weights back
    init = {k: v.clone() for k, v in net.state_dict().items()}
    train(2)
    infer(2)
    sync()
    net.load_state_dict(init)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    info = {"torch": torch.__version__, "device": a.device, "batch": n, "seq": T, "model": a.model,
            "threads": torch.get_num_threads(), "math": math_info}
    print(json.dumps({**info, "ready": True, "cpu_seconds": time.process_time()}), flush=True)
    def epoch(_):
        t0 = time.perf_counter()
        loss = train(steps)
        sync()
        s = time.perf_counter() - t0
        return {"seconds": s, "tokens_per_s": steps * n * T / s, "loss": loss, "loss_read": "epoch"}

    serve_lines(info, {"epoch": epoch, "infer": infer_handler(infer)})
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parity", metavar="DIR")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=["rnn", "lstm", "transformer"], default="lstm")
    for k, v in (("vocab", 128), ("seq", 32), ("emb", 64), ("hidden", 128), ("layers", 2), ("classes", 4),
                 ("d-model", 128), ("heads", 4), ("batch", 8), ("samples", 256), ("threads", 0)):
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--data", metavar="FILE")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--mask", choices=["none", "causal"], default="none")
    a = ap.parse_args()
    if a.parity:
        return parity(a.parity)
    if a.serve:
        return serve(a)
    print("give --parity DIR or --serve")
    return 2


if __name__ == "__main__":
    sys.exit(main())
