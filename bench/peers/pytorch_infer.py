#!/usr/bin/env python3
"""PyTorch peer of the image models' forward-only latency (suite seq, op=infer): the seeds' Net
(hidden_num_chans), the MNIST MLP, the ConvNet and the convolutional Autoencoder as nn.Modules whose
state_dict keys are dlbench's parameter names (models/zoo.cpp), the sizes read off the shapes.

  --serve --bundle DIR  DIR holds dlbench's model: manifest.json {"model", "input": [n, c, h, w],
                        "loss": "cross_entropy" | "mse", "params": [{"name", "shape"}, ...]},
                        params.f32 (the values in that order), inputs.f32 (the batch, NCHW) and, for
                        cross-entropy, labels.i32; all little-endian. Loads them, runs the batch once
                        in eval mode and prints {"ready": true, "loss": ...} (dlbench checks that loss
                        against its own forward's); then per line "infer K" runs K forward passes
                        under torch.no_grad() and prints their "latencies" (seconds each: the input's
                        move from a host tensor to the device and the synchronize included).
Exit 3 (one line) when torch does not import; dlbench then records the peer as skipped."""
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
except Exception as e:  # noqa: BLE001 - any import failure means "unavailable"
    print(f"torch does not import: {e}")
    sys.exit(3)

from peer_serve import fp32_math, infer_handler, serve_lines, timed_calls  # noqa: E402 - after the torch check


def shape_of(params, name):
    for p in params:
        if p["name"] == name:
            return p["shape"]
    raise SystemExit(f"manifest: no parameter {name}")


def build(model, params):
    """The seed's module for `model`, its layer sizes taken from dlbench's parameter shapes."""
    s = lambda n: shape_of(params, n)  # noqa: E731
    if model.startswith("net"):  # the lecture's Net(hidden_num_chans)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                w1, w2 = s("conv1.weight"), s("conv2.weight")
                self.conv1 = nn.Conv2d(w1[1], w1[0], w1[2])
                self.pool = nn.MaxPool2d(2, 2)
                self.conv2 = nn.Conv2d(w2[1], w2[0], w2[2])
                self.fc1 = nn.Linear(s("fc1.weight")[1], s("fc1.weight")[0])
                self.fc2 = nn.Linear(s("fc2.weight")[1], s("fc2.weight")[0])
                self.fc3 = nn.Linear(s("fc3.weight")[1], s("fc3.weight")[0])

            def forward(self, x):
                x = self.pool(F.relu(self.conv1(x)))
                x = self.pool(F.relu(self.conv2(x)))
                x = torch.flatten(x, 1)
                return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))
        return Net()
    if model == "mlp":  # nn.Sequential(Flatten, Linear, ReLU, Linear): keys 1.*, 3.*
        return nn.Sequential(nn.Flatten(), nn.Linear(s("1.weight")[1], s("1.weight")[0]), nn.ReLU(),
                             nn.Linear(s("3.weight")[1], s("3.weight")[0]))
    if model == "convnet":
        class ConvNet(nn.Module):
            def __init__(self):
                super().__init__()
                w1, w2 = s("conv1.weight"), s("conv2.weight")
                self.conv1 = nn.Conv2d(w1[1], w1[0], 3, padding=1)
                self.conv2 = nn.Conv2d(w2[1], w2[0], 3, padding=1)
                self.pool = nn.MaxPool2d(2, 2)
                self.fc1 = nn.Linear(s("fc1.weight")[1], s("fc1.weight")[0])
                self.fc2 = nn.Linear(s("fc2.weight")[1], s("fc2.weight")[0])

            def forward(self, x):
                x = self.pool(F.relu(self.conv1(x)))
                x = self.pool(F.relu(self.conv2(x)))
                return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))
        return ConvNet()
    if model == "autoencoder":
        e0, e2, e4 = s("encoder.0.weight"), s("encoder.2.weight"), s("encoder.4.weight")
        d0, d2, d4 = s("decoder.0.weight"), s("decoder.2.weight"), s("decoder.4.weight")  # [in, out, k, k]

        class Autoencoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Conv2d(e0[1], e0[0], 3, stride=2, padding=1), nn.ReLU(),
                                             nn.Conv2d(e2[1], e2[0], 3, stride=2, padding=1), nn.ReLU(),
                                             nn.Conv2d(e4[1], e4[0], e4[2]))
                self.decoder = nn.Sequential(nn.ConvTranspose2d(d0[0], d0[1], d0[2]), nn.ReLU(),
                                             nn.ConvTranspose2d(d2[0], d2[1], 3, stride=2, padding=1, output_padding=1),
                                             nn.ReLU(),
                                             nn.ConvTranspose2d(d4[0], d4[1], 3, stride=2, padding=1, output_padding=1),
                                             nn.Sigmoid())

            def forward(self, x):
                return self.decoder(self.encoder(x))
        return Autoencoder()
    raise SystemExit(f"--bundle: unknown model {model}")


def serve(a):
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("torch has no CUDA device")
        return 3
    math_info = fp32_math(torch, dev)
    torch.set_num_threads(a.threads or (os.cpu_count() or 1))
    with open(os.path.join(a.bundle, "manifest.json")) as f:
        man = json.load(f)
    params = man["params"]
    net = build(man["model"], params)
    flat = np.fromfile(os.path.join(a.bundle, "params.f32"), dtype="<f4")
    state, at = {}, 0
    for p in params:
        n = int(np.prod(p["shape"]))
        state[p["name"]] = torch.from_numpy(flat[at:at + n].copy()).reshape(p["shape"])
        at += n
    if at != flat.size:
        raise SystemExit(f"params.f32: {flat.size} values, the manifest names {at}")
    net.load_state_dict(state, strict=True)  # every key and shape as dlbench's, or it stops here
    net = net.to(dev).eval()
    shape = man["input"]
    x_host = torch.from_numpy(np.fromfile(os.path.join(a.bundle, "inputs.f32"), dtype="<f4").copy()).reshape(shape)
    y = None
    if man["loss"] == "cross_entropy":
        y = torch.from_numpy(np.fromfile(os.path.join(a.bundle, "labels.i32"), dtype="<i4").astype(np.int64)).to(dev)

    def loss_of(out, x):
        return F.cross_entropy(out, y) if y is not None else F.mse_loss(out, x)

    def infer(k):  # the input moved from the host inside each timed call
        return timed_calls(torch, dev, k, lambda: net(x_host.to(dev)))

    with torch.no_grad():  # the check (and the warm-up: cuDNN's search, the allocator's pools)
        x = x_host.to(dev)
        loss = float(loss_of(net(x), x))
    infer(3)
    info = {"torch": torch.__version__, "device": a.device, "batch": shape[0], "model": man["model"],
            "threads": torch.get_num_threads(), "math": math_info}
    print(json.dumps({**info, "ready": True, "loss": loss, "cpu_seconds": time.process_time()}), flush=True)
    serve_lines(info, {"infer": infer_handler(infer)})
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--bundle", metavar="DIR")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.serve and a.bundle:
        return serve(a)
    print("give --serve --bundle DIR")
    return 2


if __name__ == "__main__":
    sys.exit(main())
