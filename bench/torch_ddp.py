#!/usr/bin/python3
"""PyTorch DistributedDataParallel baseline for starconv-train.

  torch_ddp.py --model M --batch B --iters N [--procs 2] [--threads 1] [--warmup W]
               [--autocast fp32|bf16]

Trains model M (models/M.cfg or a .cfg path) on Fashion-MNIST (or, with
--data synthetic:CxHxW:K, on random images) with DDP (gloo,
world size = procs, processes spawned by torch.multiprocessing on
127.0.0.1 and a free port), torch.optim.SGD lr 0.01 momentum 0.9, samples in
order without shuffling: global batch i is samples [i*B, (i+1)*B) and rank r
trains on its contiguous slice of B/procs of them; the loss is the mean over
the global batch.  N iterations are run in all; the first W are not timed.
Rank 0 prints one line:

  torch: <images/s> images/s (<model> batch <B> iters <N> procs <P> threads <T>)

where images/s = (N - W) * B / (wall time of iterations W..N-1).
--autocast bf16 runs forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's mixed precision on CPUs (fp32 weights
and optimizer; fp32, the default, is plain fp32).
--init CKPT starts from a checkpoint, --save PATH writes the result (both
in starconv's checkpoint format, see sc_torch.save_checkpoint).
Exit 77 if torch cannot be imported.
"""

import argparse
import os
import socket
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn
except ImportError as e:
    print("torch_ddp: cannot import torch (%s); run with /usr/bin/python3" % e, file=sys.stderr)
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sc_torch  # noqa: E402


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    try:
        run(rank, args)
    finally:
        dist.destroy_process_group()


def parse_synthetic(data):
    """synthetic:CxHxW:K -> (C, H, W, K), None for anything else."""
    if not data or not data.startswith("synthetic:"):
        return None
    try:
        shape, k = data[len("synthetic:"):].split(":")
        c, h, w = (int(v) for v in shape.split("x"))
        k = int(k)
    except ValueError:
        raise sc_torch.ScError("%s: expected synthetic:CxHxW:K" % data)
    if min(c, h, w, k) < 1:
        raise sc_torch.ScError("%s: every extent must be positive" % data)
    return c, h, w, k


def load_data(data, spec, batch, seed):
    """Fashion-MNIST (uint8), or for synthetic:CxHxW:K two global batches of
    random float images made once, so that the timed loop does not include
    generating them (starconv generates its synthetic batches as tasks)."""
    syn = parse_synthetic(data)
    if syn is None:
        return sc_torch.load_idx(data, "train")
    c, h, w, k = syn
    if k != spec.classes:
        raise sc_torch.ScError("%s has %d classes, the data set %d" % (spec.path, spec.classes, k))
    g = torch.Generator().manual_seed(seed)
    return torch.rand(2 * batch, c, h, w, generator=g), torch.randint(0, k, (2 * batch,), generator=g)


def run(rank, args):
    spec = sc_torch.load_cfg(args.model)
    torch.manual_seed(args.seed)
    model = sc_torch.build_model(spec)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    if args.init:
        sc_torch.load_checkpoint(args.init, model, opt)
    ddp = nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's parameters
    loss_fn = nn.CrossEntropyLoss()
    images, labels = load_data(args.data, spec, args.batch, args.seed)
    if tuple(images.shape[1:]) != (spec.channels, spec.height, spec.width):
        raise sc_torch.ScError("%s expects %dx%dx%d inputs, the data set has %s"
                               % (spec.path, spec.channels, spec.height, spec.width,
                                  "x".join(map(str, images.shape[1:]))))
    local = args.batch // args.procs
    n = images.shape[0]

    losses = []
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.iters):
        if i == args.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        start, _ = sc_torch.batch_range(i, args.batch, n)
        lo = start + rank * local
        x = images[lo:lo + local]
        x = sc_torch.to_input(x) if x.dtype == torch.uint8 else x
        y = labels[lo:lo + local]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if args.verbose:
            losses.append(loss.detach())
    dist.barrier()
    elapsed = time.perf_counter() - t0
    timed = args.iters - args.warmup
    if args.save and rank == 0:
        sc_torch.save_checkpoint(args.save, model, opt, args.iters)
    if args.verbose:
        # mean over ranks of local means = mean over the global batch
        ls = torch.stack(losses)
        dist.all_reduce(ls)
        ls /= args.procs
        if rank == 0:
            for i in range(0, len(ls), max(1, len(ls) // 10)):
                print("iter %d loss %.5f" % (i, float(ls[i])), file=sys.stderr)
            print("iter %d loss %.5f" % (len(ls) - 1, float(ls[-1])), file=sys.stderr)
    if rank == 0:
        print("torch: %.1f images/s (%s batch %d iters %d procs %d threads %d)"
              % (timed * args.batch / elapsed, spec.name, args.batch, args.iters, args.procs,
                 args.threads), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="models/NAME.cfg or a .cfg path")
    ap.add_argument("--batch", type=int, required=True, help="global batch size")
    ap.add_argument("--iters", type=int, required=True, help="iterations in all (warm-up included)")
    ap.add_argument("--procs", type=int, default=2, help="DDP processes (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed first iterations (default 5, or N-1 when N <= 5)")
    ap.add_argument("--autocast", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: forward under torch.autocast (CPU, bfloat16)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=None,
                    help="IDX directory (default $STARCONV_DATA or %s), or synthetic:CxHxW:K"
                    % sc_torch.DEFAULT_DATA_DIR)
    ap.add_argument("--init", metavar="CKPT",
                    help="start from this checkpoint (else seeded PyTorch init); batches still start at 0")
    ap.add_argument("--save", metavar="PATH", help="rank 0 writes the final checkpoint here")
    ap.add_argument("--verbose", "-v", action="store_true", help="print losses on stderr")
    args = ap.parse_args()
    if args.procs < 1 or args.threads < 1 or args.batch < 1 or args.iters < 1:
        ap.error("--procs, --threads, --batch and --iters must be positive")
    if args.batch % args.procs:
        ap.error("--batch %d is not a multiple of --procs %d" % (args.batch, args.procs))
    if args.warmup is None:
        args.warmup = min(5, args.iters - 1)
    if not 0 <= args.warmup < args.iters:
        ap.error("--warmup must be in [0, --iters)")
    try:
        args.model = sc_torch.resolve_model(args.model)
        spec = sc_torch.load_cfg(args.model)  # report cfg errors before spawning
        syn = parse_synthetic(args.data)
        if syn and syn[3] != spec.classes:
            raise sc_torch.ScError("%s has %d classes, --data %s has %d" % (args.model, spec.classes, args.data, syn[3]))
    except sc_torch.ScError as e:
        sys.exit("torch_ddp: %s" % e)
    # Each process sets its own thread count; this keeps OpenMP from
    # starting one thread per core in the children before that.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    try:
        mp.spawn(worker, args=(args, free_port()), nprocs=args.procs, join=True)
    except mp.ProcessRaisedException as e:
        msg = str(e).strip().splitlines()
        sys.exit("torch_ddp: a worker failed: %s" % (msg[-1] if msg else e))
    except mp.ProcessExitedException as e:
        sys.exit("torch_ddp: a worker died: %s" % e)


if __name__ == "__main__":
    main()
