#!/usr/bin/python3
"""A starconv ResNet-50 checkpoint in torchvision's resnet50().

models/resnet50.cfg has torchvision's parameters tensor for tensor
(convolutions without bias, bias=0), in the order torchvision registers its
modules: conv1, bn1, then per bottleneck conv1, bn1, conv2, bn2, conv3, bn3
and, in the first block of a stage, downsample.0 and downsample.1; fc last.
So the name map pairs the cfg's layers that have parameters (in file
order) with torchvision's modules that have parameters (in registration
order), checking each pair's kind and shapes, and renames every tensor of
the checkpoint: "<i>.weight" -> "layer1.0.conv1.weight", BN's bias,
running_mean, running_var and num_batches_tracked alike.

  resnet50_torchvision.py CKPT [--model CFG] [--out FILE] [--check]

loads CKPT (a starconv checkpoint of CFG, default models/resnet50.cfg) into
torchvision.models.resnet50(num_classes=<the cfg's classes>) with
load_state_dict(strict=True); --out writes the renamed tensors (and the
momentum buffers, as optimizer.<torchvision name>.momentum_buffer) as
safetensors; --check also runs the same random input through that model
and through the cfg's own PyTorch model (bench/sc_torch.py, starconv's
names) in eval mode and requires the same logits (relative 1e-5).  Prints
the map's size and the parameter count.  Exit status 0, 1 when --check
finds a difference, 2 on bad input (one line), 77 without torchvision.

As a module: name_map(spec, model) -> {starconv name: torchvision name}.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sc_torch  # noqa: E402
from sc_torch import ScError  # noqa: E402

_KIND = {"conv": "Conv2d", "batchnorm": "BatchNorm2d", "connected": "Linear"}
_TENSORS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def name_map(spec, model):
    """{starconv state_dict name: torchvision name} for every tensor of the
    layers of spec (a sc_torch.ModelSpec) that have parameters, paired in
    order with the modules of model (torchvision's) that have them."""
    ours = [L for L in spec.layers if L.kind in _KIND]
    theirs = [(name, m) for name, m in model.named_modules()
              if name and any(True for _ in m.parameters(recurse=False))]
    if len(ours) != len(theirs):
        raise ScError("%s: %d layers with parameters, torchvision's model has %d"
                      % (spec.path, len(ours), len(theirs)))
    ref = sc_torch.build_model(spec).state_dict()
    tv = model.state_dict()
    out = {}
    for L, (name, m) in zip(ours, theirs):
        if type(m).__name__ != _KIND[L.kind]:
            raise ScError("%s:%d: [%s] pairs with torchvision's %s (%s)"
                          % (spec.path, L.line, L.kind, name, type(m).__name__))
        for t in _TENSORS:
            src, dst = "%d.%s" % (L.torch_index, t), "%s.%s" % (name, t)
            if (src in ref) != (dst in tv):
                raise ScError("%s:%d: %s %s but torchvision's %s %s"
                              % (spec.path, L.line, src, "exists" if src in ref else "does not exist", dst,
                                 "does not" if src in ref else "does"))
            if src not in ref:
                continue
            if list(ref[src].shape) != list(tv[dst].shape):
                raise ScError("%s:%d: %s is %s, torchvision's %s %s"
                              % (spec.path, L.line, src, list(ref[src].shape), dst, list(tv[dst].shape)))
            out[src] = dst
    missing = set(tv) - set(out.values())
    if missing:
        raise ScError("torchvision's %s have no starconv tensor" % ", ".join(sorted(missing)))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("--model", default=os.path.join(sc_torch.REPO_ROOT, "models", "resnet50.cfg"))
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    try:
        import torch
        import torchvision
    except ImportError as e:
        print("resnet50_torchvision: %s (Debian packages python3-torch, python3-torchvision)" % e, file=sys.stderr)
        return 77
    try:
        spec = sc_torch.load_cfg(a.model)
        tv = torchvision.models.resnet50(num_classes=spec.classes)
        names = name_map(spec, tv)
        tensors, _ = sc_torch.st_read_torch(a.ckpt)
        sd = {}
        for src, dst in names.items():
            if src not in tensors:
                raise ScError("%s: no tensor '%s' (checkpoint of another model?)" % (a.ckpt, src))
            sd[dst] = sc_torch.checkpoint_tensor(a.ckpt, src, tensors[src], tv.state_dict()[dst])
        tv.load_state_dict(sd, strict=True)
    except ScError as e:
        print("resnet50_torchvision: %s" % e, file=sys.stderr)
        return 2
    nparams = sum(p.numel() for p in tv.parameters())
    print("%s: %d tensors renamed; torchvision resnet50() loads it (strict); %d parameters"
          % (a.ckpt, len(names), nparams))
    if a.out:
        out = dict(sd)
        for src, dst in names.items():
            buf = "optimizer.%s.momentum_buffer" % src
            if buf in tensors:
                out["optimizer.%s.momentum_buffer" % dst] = tensors[buf]
        sc_torch.st_write_torch(a.out, out)
        print("wrote %s" % a.out)
    if a.check:
        ours = sc_torch.build_model(spec)
        sc_torch.load_checkpoint(a.ckpt, ours)
        ours.eval(), tv.eval()
        torch.manual_seed(1)
        x = torch.randn(2, spec.channels, spec.height, spec.width)
        with torch.no_grad():
            yo, yt = ours(x), tv(x)
        rel = float((yo - yt).abs().max() / yo.abs().max().clamp(min=1e-30))
        ok = yo.shape == yt.shape and rel <= 1e-5
        print("%s: logits of torchvision's model vs the cfg's: max relative difference %.3g"
              % ("same" if ok else "DIFFERENT", rel))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
