#!/usr/bin/python3
"""Cross-check starconv's training against PyTorch.

Check mode:
  torch_check.py --model M --init INIT.safetensors --final FINAL.safetensors \\
                 --iters K --batch B --lr LR --momentum MOM --weight-decay WD

  Loads starconv's checkpoint INIT into the model built from M
  (models/M.cfg or a .cfg path; sc_torch.build_model): parameters under
  their state_dict names ("0.weight", "0.bias", ...), batch normalization's
  running_mean / running_var / num_batches_tracked when present (absent
  ones keep PyTorch's defaults, with a warning), and, when present, the SGD
  momentum buffers "optimizer.<param>.momentum_buffer" and
  "optimizer.iteration" (absent buffers start empty, absent iteration is
  0).  Trains K iterations in one process (model.train()) with
  torch.optim.SGD (dampening 0, no Nesterov) on Fashion-MNIST samples in
  order, without shuffling: global batch i is samples [i*B, (i+1)*B),
  starting at i = INIT's optimizer.iteration (or --start-iter); inputs
  pixel/255, loss nn.CrossEntropyLoss (mean).  Then
  compares every parameter with FINAL: prints ||a-b|| / ||b|| per tensor and
  the maximum, and exits 0 if every one is <= --tol (1e-4), 1 otherwise.
  Batch normalization's running_mean / running_var count as parameters when
  FINAL has them, its num_batches_tracked must equal PyTorch's exactly;
  those FINAL lacks are reported as "not in checkpoint" and do not fail.
  --check-momentum also holds the momentum buffers (or Adam's exp_avg,
  exp_avg_sq and step) to the tolerance.
  --optimizer adam|adamw (with --betas B1,B2, --eps E; --weight-decay's
  default 0.01 for adamw, as torch's) trains with torch.optim.Adam or
  AdamW (foreach=False) instead, INIT's optimizer.<param>.exp_avg,
  .exp_avg_sq and .step mapped into its state_dict() when present.
  --save-final PATH writes PyTorch's own result as a checkpoint.
  --bf16 replays starconv-train --precision bf16: every convolution and
  fully connected layer rounds its inputs (x, the weights, and dy in
  backward) to bfloat16 (to nearest even, as PyTorch's conversion),
  computes in float64 and returns float32; forward's bias is added
  unrounded; the bias gradient sums the rounded dy in a convolution (as
  oneDNN's), the float32 dy in a fully connected layer (as starconv's);
  everything else stays float32.
  --accumulate K (as starconv-train's) makes an iteration K batches of B
  in order, their losses divided by K and their gradients summed by
  backward() before one opt.step(): iteration i is global batches
  i*K .. i*K+K-1.
  --lr-schedule S and --warmup W[:F] (as starconv-train's) step the
  learning rate each iteration with torch.optim.lr_scheduler (LinearLR,
  then MultiStepLR or CosineAnnealingLR, chained by SequentialLR) over a
  run of --total-iters iterations (default --iters) that began at
  iteration 0: the scheduler is stepped to the starting iteration first.

Learning-rate mode:
  torch_check.py --model M --print-lr N --lr LR [--lr-schedule S]
                 [--warmup W[:F]] [--total-iters T]
  prints the learning rate of iterations 0..N-1 that PyTorch's schedulers
  give, one per line.

Eval mode:
  torch_check.py --model M --eval CKPT
  prints "torch test accuracy: X%" on the t10k set (model.eval(): batch
  normalization uses CKPT's running statistics).

Init mode:
  torch_check.py --model M --write-init PATH [--seed S]
  writes PyTorch's default initialisation (seeded) as a starconv checkpoint
  (parameters, batch normalization buffers, zero momentum buffers,
  optimizer.iteration = 0).

Models with a per-pixel loss ([softmax] per_pixel=1) have no Fashion-MNIST
labels: check and eval modes refuse them (exit status 2).

Exit status: 0 pass, 1 parameters differ, 2 bad arguments or files,
77 torch cannot be imported (so that a test can skip).
"""

import argparse
import math
import os
import sys
import warnings

try:
    import torch
    from torch import nn
except ImportError as e:
    print("torch_check: cannot import torch (%s); run with /usr/bin/python3" % e, file=sys.stderr)
    sys.exit(77)

# SequentialLR steps its schedulers with an epoch argument, which warns.
warnings.filterwarnings("ignore", category=UserWarning, module="torch.optim.lr_scheduler")
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sc_torch  # noqa: E402
from sc_torch import ScError  # noqa: E402


def rel_err(a, b):
    a = a.detach().to(torch.float64)
    b = b.detach().to(torch.float64)
    diff = float(torch.linalg.vector_norm(a - b))
    ref = float(torch.linalg.vector_norm(b))
    if ref == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / ref


def bf16_round(t):
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Conv(torch.autograd.Function):
    """Conv2d on bf16-rounded inputs, exact products, float64 sums, float32 out."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding):
        xr, wr = bf16_round(x).double(), bf16_round(w).double()
        ctx.save_for_backward(xr, wr)
        ctx.geometry = (stride, padding, b is not None)
        y = nn.functional.conv2d(xr, wr, None, stride, padding)
        if b is not None:
            y = y + b.double().view(1, -1, 1, 1)
        return y.float()

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        stride, padding, has_bias = ctx.geometry
        dyr = bf16_round(dy).double()
        dx = nn.grad.conv2d_input(xr.shape, wr, dyr, stride, padding).float()
        dw = nn.grad.conv2d_weight(xr, wr.shape, dyr, stride, padding).float()
        db = dyr.sum((0, 2, 3)).float() if has_bias else None
        return dx, dw, db, None, None


class Bf16Linear(torch.autograd.Function):
    """Linear on bf16-rounded inputs, exact products, float64 sums, float32 out."""

    @staticmethod
    def forward(ctx, x, w, b):
        xr, wr = bf16_round(x).double(), bf16_round(w).double()
        ctx.save_for_backward(xr, wr)
        ctx.has_bias = b is not None
        y = xr @ wr.t()
        if b is not None:
            y = y + b.double()
        return y.float()

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        dyr = bf16_round(dy).double()
        db = dy.sum(0) if ctx.has_bias else None
        return (dyr @ wr).float(), (dyr.t() @ xr).float(), db


def bf16_layers(model):
    """Every nn.Conv2d and nn.Linear of model through Bf16Conv and
    Bf16Linear (names and parameters kept)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.forward = (lambda c: lambda x: Bf16Conv.apply(x, c.weight, c.bias, c.stride, c.padding))(m)
        elif isinstance(m, nn.Linear):
            m.forward = (lambda c: lambda x: Bf16Linear.apply(x, c.weight, c.bias))(m)
    return model


def no_per_pixel(spec):
    """The data here is Fashion-MNIST, with one label per sample."""
    if spec.per_pixel:
        raise ScError("%s:%d: [softmax] per_pixel=1: per_pixel not supported by torch_check "
                      "(one label per sample)" % (spec.path, spec.layers[-1].line))


def make_scheduler(opt, spec, warmup, total):
    """torch.optim.lr_scheduler objects for starconv's --lr-schedule SPEC and
    --warmup W[:F] over a run of total iterations (None: constant)."""
    sched = torch.optim.lr_scheduler
    w, start = 0, 1.0 / 3
    if warmup:
        parts = warmup.split(":")
        w = int(parts[0])
        if len(parts) > 1:
            start = float(parts[1])
    name, _, rest = (spec or "constant").partition(":")
    if name == "constant":
        main = sched.LambdaLR(opt, lambda t: 1.0) if w else None
    elif name == "step":
        ms, _, gamma = rest.partition(":")
        main = sched.MultiStepLR(opt, [int(m) for m in ms.split(",")], gamma=float(gamma or 0.1))
    elif name == "cosine":
        main = sched.CosineAnnealingLR(opt, T_max=total - w, eta_min=float(rest or 0.0))
    else:
        raise ScError("--lr-schedule %s: constant, step:M1,...[:GAMMA] or cosine[:MIN]" % spec)
    if not w:
        return main
    lin = sched.LinearLR(opt, start_factor=start, end_factor=1.0, total_iters=w)
    return sched.SequentialLR(opt, [lin, main], milestones=[w])


def train(model, opt, images, labels, start, iters, batch, scheduler=None, accumulate=1):
    loss_fn = nn.CrossEntropyLoss()
    n = images.shape[0]
    loss = None
    model.train()  # batch normalization: batch statistics, running ones updated
    for i in range(start, start + iters):
        opt.zero_grad(set_to_none=True)
        for k in range(accumulate):  # gradient accumulation: backward() adds to .grad
            lo, hi = sc_torch.batch_range(i * accumulate + k, batch, n)
            x = sc_torch.to_input(images[lo:hi])
            loss = loss_fn(model(x), labels[lo:hi]) / accumulate
            loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return loss


def make_optimizer(args, model):
    """torch.optim.SGD, Adam or AdamW (--optimizer) on model's parameters,
    the single-tensor implementations (foreach=False) that starconv's
    kernels follow op by op."""
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                               weight_decay=args.weight_decay or 0.0)
    betas = tuple(float(b) for b in args.betas.split(","))
    cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    wd = args.weight_decay if args.weight_decay is not None else (0.0 if args.optimizer == "adam" else 0.01)
    return cls(model.parameters(), lr=args.lr, betas=betas, eps=args.eps, weight_decay=wd, foreach=False)


def do_check(args, spec):
    no_per_pixel(spec)
    model = sc_torch.build_model(spec)
    if args.bf16:
        bf16_layers(model)
    opt = make_optimizer(args, model)
    it0 = sc_torch.load_checkpoint(args.init, model, opt)
    start = args.start_iter if args.start_iter is not None else it0
    final, _ = sc_torch.st_read_torch(args.final)

    images, labels = sc_torch.load_idx(args.data, "train")
    scheduler = make_scheduler(opt, args.lr_schedule, args.warmup, args.total_iters or start + args.iters)
    for _ in range(start if scheduler is not None else 0):
        opt.step()  # no gradients yet: only the scheduler's order of calls is kept
        scheduler.step()
    loss = train(model, opt, images, labels, start, args.iters, args.batch, scheduler, args.accumulate)
    print("torch_check: %s%s, %d iterations from iteration %d, batch %d, %s, lr %g, momentum %g, "
          "weight decay %g; last loss %.6f"
          % (spec.name, " (convolutions and fully connected layers on bf16 inputs)" if args.bf16 else "",
             args.iters, start, args.batch, args.optimizer, args.lr, args.momentum,
             opt.param_groups[0]["weight_decay"], float(loss) if loss is not None else float("nan")))
    if args.save_final:
        sc_torch.save_checkpoint(args.save_final, model, opt, start + args.iters)

    worst, worst_name, ok = 0.0, None, True
    buffers = set(sc_torch.buffer_names(model))
    for name, p in model.state_dict().items():
        if name not in final:
            if name in buffers:
                print("  %-34s %-16s not in checkpoint" % (name, "x".join(map(str, p.shape)) or "scalar"))
                continue
            raise ScError("%s: no tensor '%s'" % (args.final, name))
        f = sc_torch.checkpoint_tensor(args.final, name, final[name], p)
        if p.dtype == torch.int64:  # num_batches_tracked: exactly
            bad = int(f) != int(p)
            ok &= not bad
            print("  %-34s %-16s %d, torch %d%s" % (name, "scalar", int(f), int(p), "  differs" if bad else ""))
            continue
        e = rel_err(f, p)
        bad = not e <= args.tol
        ok &= not bad
        print("  %-34s %-16s rel err %.3e%s" % (name, "x".join(map(str, p.shape)), e,
                                                 "  > tol" if bad else ""))
        if not e <= worst:
            worst, worst_name = e, name
    params = dict(model.named_parameters())
    for pname, names in sc_torch.adam_names(model).items():
        st = opt.state.get(params[pname], {})
        for bname, key in zip(names, sc_torch.ADAM_STATE):
            if bname not in final or key not in st:
                continue
            e = rel_err(final[bname], st[key])
            bad = args.check_momentum and not e <= args.tol
            ok &= not bad
            print("  %-34s %-16s rel err %.3e%s" % (bname, "x".join(map(str, st[key].shape)) or "scalar", e,
                                                     "  > tol" if bad else ""))
            if args.check_momentum and not e <= worst:
                worst, worst_name = e, bname
    for pname, bname in sc_torch.optimizer_names(model).items():
        if bname not in final:
            continue
        buf = opt.state.get(params[pname], {}).get("momentum_buffer")
        if buf is None:
            buf = torch.zeros_like(params[pname])
        f = final[bname]
        if list(f.shape) != list(buf.shape):
            raise ScError("%s: tensor '%s' has shape %s, expected %s"
                          % (args.final, bname, list(f.shape), list(buf.shape)))
        e = rel_err(f, buf)
        bad = args.check_momentum and not e <= args.tol
        ok &= not bad
        print("  %-34s %-16s rel err %.3e%s" % (bname, "x".join(map(str, buf.shape)), e,
                                                 "  > tol" if bad else ""))
        if args.check_momentum and not e <= worst:
            worst, worst_name = e, bname
    if "optimizer.iteration" in final:
        fit = int(final["optimizer.iteration"].reshape(-1)[0])
        if fit != start + args.iters:
            print("torch_check: warning: %s has optimizer.iteration %d, expected %d"
                  % (args.final, fit, start + args.iters), file=sys.stderr)
    print("max relative error: %.3e (%s)" % (worst, worst_name))
    if ok:
        print("PASS (tolerance %g)" % args.tol)
        return 0
    print("FAIL (tolerance %g)" % args.tol)
    return 1


def do_eval(args, spec):
    no_per_pixel(spec)
    model = sc_torch.build_model(spec)
    sc_torch.load_checkpoint(args.eval, model)
    images, labels = sc_torch.load_idx(args.data, "t10k")
    model.eval()
    correct = 0
    with torch.no_grad():
        for lo in range(0, images.shape[0], 1000):
            out = model(sc_torch.to_input(images[lo:lo + 1000]))
            correct += int((out.argmax(1) == labels[lo:lo + 1000]).sum())
    print("torch test accuracy: %.2f%%" % (100.0 * correct / images.shape[0]))
    return 0


def do_write_init(args, spec):
    torch.manual_seed(args.seed)
    model = sc_torch.build_model(spec)
    sc_torch.save_checkpoint(args.write_init, model, None, 0)
    print("torch_check: wrote %s (%s, seed %d)" % (args.write_init, spec.name, args.seed))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--model", required=True, help="models/NAME.cfg or a .cfg path")
    ap.add_argument("--init", help="starconv's initial checkpoint")
    ap.add_argument("--final", help="starconv's checkpoint after --iters iterations")
    ap.add_argument("--iters", type=int, help="iterations K")
    ap.add_argument("--batch", type=int, help="global batch size B")
    ap.add_argument("--accumulate", type=int, default=1,
                    help="K batches of B per iteration, one optimizer step (default 1)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=None,
                    help="default 0, 0.01 for adamw (as torch.optim's)")
    ap.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="sgd",
                    help="torch.optim.SGD (default), Adam or AdamW (foreach=False)")
    ap.add_argument("--betas", default="0.9,0.999", help="Adam's B1,B2 (default 0.9,0.999)")
    ap.add_argument("--eps", type=float, default=1e-8, help="Adam's eps (default 1e-8)")
    ap.add_argument("--lr-schedule", default=None, help="as starconv-train's (default constant)")
    ap.add_argument("--warmup", default=None, help="W[:F], as starconv-train's")
    ap.add_argument("--total-iters", type=int, default=None,
                    help="iterations of the whole run the schedule spans (default: start + --iters)")
    ap.add_argument("--print-lr", type=int, metavar="N", default=None,
                    help="print the learning rate of iterations 0..N-1 and exit")
    ap.add_argument("--tol", type=float, default=1e-4, help="max relative error (default 1e-4)")
    ap.add_argument("--start-iter", type=int, default=None,
                    help="first global batch (default INIT's optimizer.iteration, else 0)")
    ap.add_argument("--check-momentum", action="store_true",
                    help="hold FINAL's momentum buffers to --tol as well")
    ap.add_argument("--bf16", action="store_true",
                    help="replay --precision bf16: convolutions and fully connected layers on bf16-rounded inputs")
    ap.add_argument("--save-final", metavar="PATH", help="write PyTorch's result as a checkpoint")
    ap.add_argument("--eval", metavar="CKPT", help="print the t10k accuracy of CKPT and exit")
    ap.add_argument("--write-init", metavar="PATH", help="write a seeded initial checkpoint and exit")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--data", default=None,
                    help="IDX directory (default $STARCONV_DATA or %s)" % sc_torch.DEFAULT_DATA_DIR)
    args = ap.parse_args()
    if args.print_lr is not None:
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=args.lr)
        try:
            scheduler = make_scheduler(opt, args.lr_schedule, args.warmup, args.total_iters or args.print_lr)
        except (ScError, ValueError) as e:
            print("torch_check: %s" % e, file=sys.stderr)
            return 2
        for _ in range(args.print_lr):
            print("%.9g" % opt.param_groups[0]["lr"])
            opt.step()
            if scheduler is not None:
                scheduler.step()
        return 0
    modes = sum(x is not None for x in (args.eval, args.write_init, args.init or args.final))
    if modes != 1:
        ap.error("give one of --eval CKPT, --write-init PATH, or --init/--final")
    if args.init is not None or args.final is not None:
        missing = [o for o, v in (("--init", args.init), ("--final", args.final),
                                  ("--iters", args.iters), ("--batch", args.batch)) if v is None]
        if missing:
            ap.error("check mode needs %s" % ", ".join(missing))
        if args.iters < 0 or args.batch < 1 or args.accumulate < 1:
            ap.error("--iters must be >= 0, --batch and --accumulate >= 1")
    torch.set_num_threads(max(1, args.threads))
    try:
        spec = sc_torch.load_cfg(args.model)
        if args.eval is not None:
            return do_eval(args, spec)
        if args.write_init is not None:
            return do_write_init(args, spec)
        return do_check(args, spec)
    except ScError as e:
        print("torch_check: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
