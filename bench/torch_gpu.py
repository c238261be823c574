#!/usr/bin/python3
"""PyTorch on one GPU, the baseline of bench/gpu-vs-pytorch.

  torch_gpu.py --model M --batch B --iters N [--warmup W] [--device cuda]

Builds model M (models/M.cfg or a .cfg path) as starconv does (sc_torch) and
trains it on a fixed synthetic batch of the model's input shape (random
normal images, random labels; no data loading), torch.optim.SGD lr 0.01
momentum 0.9, cuDNN autotuning on (torch.backends.cudnn.benchmark).  N
iterations in all; the first W (default 5) are not timed.  Prints one line:

  torch: <images/s> images/s (<model> batch <B> iters <N> device <D>)

Exit 77 if torch cannot be imported or the device is not available.
"""

import argparse
import os
import sys
import time

try:
    import torch
    from torch import nn
except ImportError as e:
    print("torch_gpu: cannot import torch (%s); run with /usr/bin/python3" % e, file=sys.stderr)
    sys.exit(77)

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sc_torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="models/NAME.cfg or a .cfg path")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--iters", type=int, required=True, help="iterations in all (warm-up included)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    if args.iters <= args.warmup:
        ap.error("--iters must exceed --warmup")
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("torch_gpu: no CUDA device visible to PyTorch", file=sys.stderr)
        sys.exit(77)
    try:
        spec = sc_torch.load_cfg(sc_torch.resolve_model(args.model))
    except sc_torch.ScError as e:
        print("torch_gpu: %s" % e, file=sys.stderr)
        sys.exit(2)
    torch.backends.cudnn.benchmark = True
    model = sc_torch.build_model(spec).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    c, h, w = spec.channels, spec.height, spec.width
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(args.batch, c, h, w, generator=gen).to(dev)
    y = torch.randint(0, spec.classes, (args.batch,), generator=gen).to(dev)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for i in range(args.iters):
        if i == args.warmup:
            sync()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    sync()
    dt = time.perf_counter() - t0
    print("torch: %.1f images/s (%s batch %d iters %d device %s)"
          % ((args.iters - args.warmup) * args.batch / dt, args.model, args.batch, args.iters, dev))


if __name__ == "__main__":
    main()
