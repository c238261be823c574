#!/usr/bin/python3
"""Replay of starconv-train --grad-dtype bf16 on P ranks, sample parallel.

  torch_grad_dtype.py --model M --init INIT --final FINAL --ranks P
                      --iters K --batch B --lr LR --momentum MOM
                      --weight-decay WD --segment-kb KB [--wire bf16|fp32]
                      [--order ring|reversed] [--tol TOL]

Trains K iterations from starconv's checkpoint INIT as P ranks would: rank
r computes the gradient of its samples [r*B/P, (r+1)*B/P) of each global
batch (loss: the sum of their cross-entropies over B), and each layer's
gradient vector (its weights then its bias: one bucket a layer, as
--grad-comm layer has it) is summed as starconv's ring sums it: the vector
in P*K pieces (K segments a chunk, from the chunk's bytes and --segment-kb
as tasks/collectives.c sizes them; the first n mod P*K pieces one element
longer, as starpu_vector_filter_block cuts), chunk c starting at rank c
and passed on to c+1, ..., c+P-1, each rank adding its own gradient in
fp32 to what it received.  With --wire bf16 each partial sum is rounded to
bf16 when sent (torch's float -> bfloat16: round to nearest even), as
--grad-dtype bf16 sends it.  The sum then goes through torch.optim.SGD.

--order reversed passes each chunk the other way round the ring (a replay
that is wrong on purpose: the test shows the comparison fails on it).

Compares every parameter's change over the run (FINAL - INIT) with the
replay's: prints ||a-b|| / ||b|| per tensor, exits 0 when every one is
<= --tol, 1 otherwise, 2 on bad arguments, 77 without torch.
"""

import argparse
import math
import os
import sys

try:
    import torch
    from torch import nn
except ImportError as e:
    print("torch_grad_dtype: cannot import torch (%s)" % e, file=sys.stderr)
    sys.exit(77)

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import sc_torch  # noqa: E402

MAX_SEGMENTS = 8


def pieces(n, P, seg_bytes):
    """Element ranges of the P chunks, as the ring cuts an n-float vector."""
    K = (n // P * 4) // seg_bytes
    K = min(max(K, 1), MAX_SEGMENTS)
    parts, base, extra = P * K, n // (P * K), n % (P * K)

    def start(p):
        return p * base + min(p, extra)

    return [(start(c * K), start((c + 1) * K)) for c in range(P)]


def ring_sum(grads, seg_bytes, wire, order):
    """The ring's reduce-scatter of the ranks' flat gradients, each chunk
    summed along the ring from its first rank; with wire bf16 each partial
    sum rounded to bf16 when sent."""
    P = len(grads)
    n = grads[0].numel()
    out = torch.empty(n, dtype=torch.float32)
    for c, (a, b) in enumerate(pieces(n, P, seg_bytes)):
        step = 1 if order == "ring" else -1
        ranks = [(c + step * k) % P for k in range(P)]
        acc = grads[ranks[0]][a:b].clone()
        for q in ranks[1:]:
            sent = acc.to(torch.bfloat16).to(torch.float32) if wire == "bf16" else acc
            acc = grads[q][a:b] + sent
        out[a:b] = acc
    return out


def rel(a, b):
    a, b = a.double(), b.double()
    ref = float(torch.linalg.vector_norm(b))
    d = float(torch.linalg.vector_norm(a - b))
    return d / ref if ref else (0.0 if d == 0 else math.inf)


def main():
    ap = argparse.ArgumentParser()
    for o in ("--model", "--init", "--final", "--data"):
        ap.add_argument(o, required=o != "--data")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--iters", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--segment-kb", type=int, required=True)
    ap.add_argument("--wire", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--order", choices=("ring", "reversed"), default="ring")
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    P, B = args.ranks, args.batch
    if P < 1 or B % P:
        ap.error("--batch must be a multiple of --ranks")
    torch.set_num_threads(1)
    try:
        spec = sc_torch.load_cfg(args.model)
        model = sc_torch.build_model(spec)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                              weight_decay=args.weight_decay)
        it0 = sc_torch.load_checkpoint(args.init, model, opt)
        init = {k: v.detach().clone() for k, v in model.state_dict().items()}
        final, _ = sc_torch.st_read_torch(args.final)
        images, labels = sc_torch.load_idx(args.data, "train")
    except sc_torch.ScError as e:
        print("torch_grad_dtype: %s" % e, file=sys.stderr)
        return 2
    # layers' parameter groups in model order: weight then bias of each
    params = list(model.named_parameters())
    layers = {}
    for name, p in params:
        layers.setdefault(name.rsplit(".", 1)[0], []).append(p)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    model.train()
    for i in range(it0, it0 + args.iters):
        lo, _ = sc_torch.batch_range(i, B, images.shape[0])
        per_rank = []
        for r in range(P):
            a, b = lo + r * B // P, lo + (r + 1) * B // P
            model.zero_grad(set_to_none=True)
            (loss_fn(model(sc_torch.to_input(images[a:b])), labels[a:b]) / B).backward()
            per_rank.append({k: torch.cat([p.grad.reshape(-1) for p in ps]) for k, ps in layers.items()})
        for k, ps in layers.items():
            g = ring_sum([pr[k] for pr in per_rank], args.segment_kb << 10, args.wire, args.order)
            off = 0
            for p in ps:
                p.grad = g[off:off + p.numel()].reshape(p.shape).clone()
                off += p.numel()
        opt.step()
    worst, ok = 0.0, True
    for name, p in model.named_parameters():
        f = final[name].to(torch.float32).reshape(p.shape)
        e = rel(f - init[name], p.detach() - init[name])
        worst = max(worst, e)
        bad = not e <= args.tol
        ok &= not bad
        print("  %-10s %-14s change rel err %.3e%s" % (name, "x".join(map(str, p.shape)), e,
                                                        "  > tol" if bad else ""))
    print("torch_grad_dtype: %d ranks, wire %s, order %s: max %.3e, tolerance %g: %s"
          % (P, args.wire, args.order, worst, args.tol, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
