#!/usr/bin/env python3
"""PyTorch peer of the lecture suite: Net(hidden_num_chans=128), CrossEntropy, SGD(0.001, 0.9),
one epoch of synthetic CIFAR-shaped images per repetition, batches gathered on the host and moved
to the device per step (the lecture's loop). Prints one JSON line per repetition:
{"torch", "device", "batch", "images", "seconds", "imgs_per_s", "loss", "loss_read" ("epoch": summed on
the device, read once per epoch, as dlbench does), "math", "cpu_seconds" (the
process's CPU time so far, all threads: dlbench counts it as its own load)}. With --serve it
prints {"ready": true, ...} after the warm-up and then runs one epoch per line "epoch" read from
stdin (dlbench times the peer's epochs in the rounds of its own, interleaved), until end of input. On a CUDA device the
math is dlbench's: fp32 is plain FP32 (TF32 off for cuDNN and matmul; PyTorch leaves cuDNN's TF32 on
by default) and cuDNN picks its algorithms by benchmarking (cudnn.benchmark, as dlbench searches
too); "math" records these settings. The CPU path is untouched ("math" is {} there).
With --data DIR the epochs are fed by torchvision over files instead of resident tensors (dlbench's
--loader): CIFAR10 (a cifar-10-batches-py folder) or ImageFolder (--data-format folder), ToTensor +
Normalize, DataLoader(batch, shuffle=True, num_workers=--workers, pin_memory=--pin on), each batch
moved by .to(device, non_blocking=True); a new iterator (new worker processes) per epoch.
Exit 3 (one line) when torch does not import; dlbench then records the peer as skipped."""
import argparse
import json
import os
import resource
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 - any import failure means "unavailable"
    print(f"torch does not import: {e}")
    sys.exit(3)


class Net(nn.Module):
    """The lecture's network: conv 3->h 5x5, pool, conv h->16 5x5, pool, fc 400-120-84-10."""

    def __init__(self, hidden_num_chans: int = 128):
        super().__init__()
        self.conv1 = nn.Conv2d(3, hidden_num_chans, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(hidden_num_chans, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--images", type=int, default=50000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: every core)")
    ap.add_argument("--serve", action="store_true", help="one epoch per line 'epoch' on stdin")
    ap.add_argument("--data", help="fed by a DataLoader over these files (a cifar-10-batches-py or image folder)")
    ap.add_argument("--data-format", choices=["python", "folder"], default="python")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pin", choices=["on", "off"], default="off")
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.batch <= 0 or a.images <= 0 or a.reps <= 0:
        print("batch, images and reps must be positive")
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch has no CUDA device")
        return 3
    dev = torch.device(a.device)
    math = {}
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        math = {"cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                "cudnn_benchmark": torch.backends.cudnn.benchmark}
    # Every core, as OpenBLAS uses on our side (some builds default to one intra-op thread).
    threads = a.threads or (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    loader = None
    if a.data:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            from pytorch_loader import dataset  # noqa: E402 - beside this script; exits 3 without torchvision
        except SystemExit:
            print("torchvision does not import")
            return 3
        ds = dataset(a.data_format, a.data, limit=a.images)
        a.images = len(ds)
        kw = {"prefetch_factor": a.prefetch} if a.workers > 0 else {}
        loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                             pin_memory=a.pin == "on", generator=torch.Generator().manual_seed(a.seed),
                                             **kw)
        images = torch.zeros(min(a.images, a.batch), 3, 32, 32)  # the warm-up's batch shapes only
        labels = torch.zeros(min(a.images, a.batch), dtype=torch.long)
    else:
        images = torch.rand(a.images, 3, 32, 32, generator=g) * 2 - 1
        labels = torch.randint(0, 10, (a.images,), generator=g)
    torch.manual_seed(0)
    net = Net(128).to(dev)
    crit = nn.CrossEntropyLoss()
    # Untimed warm-up, as dlbench's own cases get (Trainer::prepare): one step at each batch shape of
    # the epoch (full and the partial last), so CUDA/cuBLAS/cuDNN lazy initialisation stays out of
    # the timed epochs; then the initial weights are restored and the optimizer starts fresh.
    init = {k: v.clone() for k, v in net.state_dict().items()}
    warm = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    for n in {a.batch, a.images % a.batch} - {0}:
        x, y = images[:n].to(dev), labels[:n].to(dev)
        warm.zero_grad()
        crit(net(x), y).backward()
        warm.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    net.load_state_dict(init)
    opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    info = {"torch": torch.__version__, "device": a.device, "batch": a.batch, "images": a.images,
            "threads": torch.get_num_threads(), "math": math}
    if loader is not None:
        info["fed_by"] = {"workers": a.workers, "pin_memory": a.pin == "on", "prefetch_factor": a.prefetch,
                          "format": a.data_format, "non_blocking": True}

    def cpu_seconds() -> float:
        """This process and its reaped children (the DataLoader's workers, reaped when an epoch's
        iterator ends): dlbench counts them as the run's own load."""
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def batches():
        if loader is not None:
            for x, y in loader:
                yield x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            return
        order = torch.randperm(a.images, generator=g)
        for first in range(0, a.images, a.batch):
            idx = order[first:first + a.batch]
            yield images[idx].to(dev), labels[idx].to(dev)

    def epoch() -> None:
        t0 = time.perf_counter()
        # The loss is summed on the device and read once per epoch, as dlbench's trainers do: the
        # lecture's loss.item() every step would add a host sync per step that ours does not pay
        # (a few % at batch 2-4), so both do the same work; "loss_read" records it.
        total, steps = torch.zeros((), device=dev), 0
        for x, y in batches():
            opt.zero_grad()
            loss = crit(net(x), y)
            loss.backward()
            opt.step()
            total += loss.detach()
            steps += 1
        mean = total.item() / max(1, steps)  # the one read (a sync on CUDA)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        s = time.perf_counter() - t0
        print(json.dumps({**info, "seconds": s, "imgs_per_s": a.images / s, "loss": mean,
                          "loss_read": "epoch", "cpu_seconds": cpu_seconds()}), flush=True)

    if a.serve:
        print(json.dumps({**info, "ready": True, "cpu_seconds": cpu_seconds()}), flush=True)
        for line in sys.stdin:
            if line.strip() == "epoch":
                epoch()
        return 0
    for _ in range(a.reps):
        epoch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
