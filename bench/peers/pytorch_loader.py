#!/usr/bin/env python3
"""PyTorch peer of `dlbench data load`: the same files through torchvision's datasets (CIFAR10 over
python batches, ImageFolder over an image folder), the same transforms (ToTensor, Normalize((0.5,)*3,
(0.5,)*3), with --augment crop-flip first RandomCrop(32, padding=4) and RandomHorizontalFlip()) and
torch.utils.data.DataLoader(batch_size, shuffle=True, num_workers, pin_memory, prefetch_factor). Each
epoch makes a new iterator, so new worker processes (persistent_workers=False, PyTorch's default),
as dlbench makes a new Loader per repetition. Prints {"ready": true, ...} once the dataset object is
built, then serves one epoch per line "epoch" on stdin with one JSON line: images, seconds,
first_batch_s (iterator created -> first batch), cpu_s (this process and its reaped children).
Exit 3 (one line) when torch or torchvision does not import."""
import argparse
import json
import os
import resource
import sys
import time

try:
    import torch
    import torchvision
    from torchvision import transforms
except Exception as e:  # noqa: BLE001 - any import failure means "unavailable"
    print(f"torch/torchvision do not import: {e}")
    sys.exit(3)


class Cifar10Files(torchvision.datasets.CIFAR10):
    """torchvision's CIFAR10 reading these files as they are: the MD5 check that guards a download
    does not know a synthetic set (nothing else of the class is changed)."""

    meta = {"filename": "batches.meta", "key": "label_names", "md5": None}

    def _check_integrity(self) -> bool:
        return True


def cpu_s() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def dataset(fmt: str, path: str, split: str = "train", augment: str = "none", limit: int = 0):
    """torchvision's dataset over the files (also used by pytorch_lecture.py --data): CIFAR10 over a
    cifar-10-batches-py folder, ImageFolder over an image folder; ToTensor + Normalize((0.5,)*3, (0.5,)*3),
    with crop-flip first RandomCrop(32, padding=4) and RandomHorizontalFlip(); the first `limit` samples."""
    steps = [transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]
    if augment == "crop-flip":
        steps = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()] + steps
    tf = transforms.Compose(steps)
    if fmt == "python":
        Cifar10Files.base_folder = os.path.basename(os.path.normpath(path))
        ds = Cifar10Files(os.path.dirname(os.path.normpath(path)), train=split == "train", transform=tf)
    else:
        ds = torchvision.datasets.ImageFolder(path, transform=tf)
    if limit and limit < len(ds):
        ds = torch.utils.data.Subset(ds, range(limit))
    return ds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["python", "folder"], required=True)
    ap.add_argument("--path", required=True, help="cifar-10-batches-py folder, or the image folder's root")
    ap.add_argument("--split", default="train")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--pin", default="off")
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--augment", default="none")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    ds = dataset(a.format, a.path, a.split, a.augment, a.limit)
    g = torch.Generator().manual_seed(a.seed)
    kw = {"prefetch_factor": a.prefetch} if a.workers > 0 else {}
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                     pin_memory=a.pin == "on", generator=g, **kw)
    print(json.dumps({"ready": True, "torch": torch.__version__, "torchvision": torchvision.__version__,
                      "samples": len(ds), "intraop_threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        if line.strip() != "epoch":
            continue
        c0, t0 = cpu_s(), time.perf_counter()
        first, images = None, 0
        for x, y in dl:
            if first is None:
                first = time.perf_counter() - t0
            images += x.shape[0]
        t1 = time.perf_counter()
        print(json.dumps({"images": images, "seconds": t1 - t0, "first_batch_s": first, "cpu_s": cpu_s() - c0}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
