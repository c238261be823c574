"""PyTorch side of starconv's benchmarks and cross-checks.

Shared helpers for bench/torch_ddp.py and bench/torch_check.py:

  * load_cfg(path) / build_model(cfg): starconv's Darknet-style .cfg file ->
    nn.Sequential with the same layers, in the same order, so that the
    state_dict names ("0.weight", "0.bias", "3.weight", ...) are the names of
    starconv's checkpoint tensors; a model with [route] or [shortcut] layers
    gives a GraphNet, whose modules have the names they would have in that
    nn.Sequential;
  * load_idx(dir, prefix): Fashion-MNIST IDX files (optionally .gz) -> uint8
    images [N, 1, H, W] and int64 labels; to_input() turns images into the
    float inputs pixel/255 (no other normalisation, as starconv does);
  * st_read / st_write: safetensors files in pure Python (no safetensors
    package in Debian); st_read_torch / st_write_torch convert to and from
    torch tensors.

The safetensors part needs neither torch nor numpy.  Run
"sc_torch.py MODEL.cfg" to print the layers, shapes and parameter names.
"""

import gzip
import json
import os
import struct
import sys

try:
    import torch
    from torch import nn
except ImportError:  # the safetensors helpers still work without torch
    torch = None
    nn = None

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ScError(Exception):
    """A malformed file or bad argument; the message says what and where."""


# ---------------------------------------------------------------------------
# Configuration files

def parse_cfg_text(text, name="<string>"):
    """Parse Darknet-style INI text into [(section, {key: (value, line)}, line)].

    '#' and ';' start comments (anywhere on a line), blank lines are skipped,
    "[name]" opens a section, "key=value" (spaces tolerated) adds a key."""
    sections = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw
        for c in "#;":
            i = line.find(c)
            if i >= 0:
                line = line[:i]
        line = line.strip()
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise ScError("%s:%d: malformed section header '%s'" % (name, lineno, raw.strip()))
            sections.append((line[1:-1].strip(), {}, lineno))
            continue
        if "=" not in line:
            raise ScError("%s:%d: expected key=value, got '%s'" % (name, lineno, line))
        if not sections:
            raise ScError("%s:%d: key outside of any section" % (name, lineno))
        key, value = (s.strip() for s in line.split("=", 1))
        if not key:
            raise ScError("%s:%d: empty key" % (name, lineno))
        keys = sections[-1][1]
        if key in keys:
            raise ScError("%s:%d: duplicate key '%s' in [%s]" % (name, lineno, key, sections[-1][0]))
        keys[key] = (value, lineno)
    return sections


class _Section:
    def __init__(self, path, name, keys, line):
        self.path, self.name, self.keys, self.line = path, name, keys, line
        self.used = set()

    def get_int(self, key, default=None, lo=None, hi=None):
        if key not in self.keys:
            if default is None:
                raise ScError("%s:%d: [%s] needs key '%s'" % (self.path, self.line, self.name, key))
            return default
        self.used.add(key)
        value, line = self.keys[key]
        try:
            v = int(value, 10)
        except ValueError:
            raise ScError("%s:%d: %s=%s is not an integer" % (self.path, line, key, value))
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ScError("%s:%d: %s=%d out of range [%s, %s]" % (self.path, line, key, v, lo, hi))
        return v

    def get_str(self, key, default, choices):
        if key not in self.keys:
            return default
        self.used.add(key)
        value, line = self.keys[key]
        if value not in choices:
            raise ScError("%s:%d: %s=%s: expected one of %s" % (self.path, line, key, value, ", ".join(choices)))
        return value

    def get_any(self, key):
        """key's value, unchecked (a setting that only starconv reads), or None."""
        if key not in self.keys:
            return None
        self.used.add(key)
        return self.keys[key][0]

    def check_unused(self):
        for key, (_, line) in self.keys.items():
            if key not in self.used:
                raise ScError("%s:%d: unknown key '%s' in [%s]" % (self.path, line, key, self.name))


class LayerSpec:
    """One layer of a model.

    kind is one of conv, batchnorm, maxpool, avgpool, gap (global_avgpool),
    connected, route, shortcut, softmax.  Every layer has: index (its number,
    from 0 after [net]), line, src (the layer whose output it reads, -1 for
    the network's input; routes are read through), out (its output shape:
    (c, h, w), or (n,) once flat), torch_index (the index of its first
    module, as in starconv's checkpoint names) and modules (how many modules
    it adds).  A shortcut also has src2 (its from= layer), a route has
    target (= src, the layer whose output it is)."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.__dict__.update(kw)

    def __repr__(self):
        return "LayerSpec(%s)" % ", ".join("%s=%r" % kv for kv in self.__dict__.items())


class ModelSpec:
    def __init__(self, path, channels, height, width, classes, layers):
        self.path, self.channels, self.height, self.width = path, channels, height, width
        self.classes, self.layers = classes, layers

    @property
    def name(self):
        return os.path.splitext(os.path.basename(self.path))[0]

    @property
    def is_graph(self):
        """True when a [route] or [shortcut] makes the model more than a chain."""
        return any(L.kind in ("route", "shortcut") for L in self.layers)

    @property
    def per_pixel(self):
        """True when the loss is [softmax] per_pixel=1."""
        return bool(self.layers and self.layers[-1].kind == "softmax" and self.layers[-1].per_pixel)


def resolve_model(model):
    """A model argument is a .cfg path or a name: "lenet" -> <repo>/models/lenet.cfg."""
    if os.path.isfile(model):
        return model
    if os.sep not in model and not model.endswith(".cfg"):
        p = os.path.join(REPO_ROOT, "models", model + ".cfg")
        if os.path.isfile(p):
            return p
    raise ScError("%s: no such model file (nor models/%s.cfg)" % (model, model))


def _out_size(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _shape_str(shape):
    return "x".join(map(str, shape))


def load_cfg(path):
    """Read and check a model file; returns a ModelSpec with output shapes."""
    path = resolve_model(path)
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScError("%s: %s" % (path, e.strerror))
    return parse_model_text(text, path)


def _layer_ref(s, key, index):
    """The layer named by key (route's layers=, shortcut's from=) of layer
    number index: negative is relative to index, otherwise absolute; it must
    be an earlier layer."""
    v = s.get_int(key, None, -(1 << 20), 1 << 20)
    target = index + v if v < 0 else v
    if not 0 <= target < index:
        raise ScError("%s:%d: %s=%d in [%s] (layer %d) must name an earlier layer (%d..-1 or 0..%d)"
                      % (s.path, s.keys[key][1], key, v, s.name, index, -index, index - 1))
    return target


def parse_model_text(text, path="<string>"):
    """Check a model's text and compute its layers (see LayerSpec).

    The layers count from 0 after [net]; a [route] is its target's output
    (the next layer reads that), a [shortcut] adds the previous layer's
    output and its from= layer's.  torch_index follows starconv: a running
    counter, advanced by each layer's module count (convolutional,
    batchnorm, connected: 1, +1 with activation=relu; pools 1; route,
    shortcut, softmax 0) and by one nn.Flatten before the first
    [connected]."""
    raw = parse_cfg_text(text, path)
    if not raw or raw[0][0] != "net":
        raise ScError("%s: the first section must be [net]" % path)
    net = _Section(path, *raw[0])
    c = net.get_int("channels", 1, 1, 1 << 16)
    h = net.get_int("height", None, 1, 1 << 16)
    w = net.get_int("width", None, 1, 1 << 16)
    classes = net.get_int("classes", 10, 2, 1 << 20)
    # [net] may carry settings that only starconv reads (batch, ...): not checked.
    layers = []
    torch_index, flat = 0, False
    for sname, keys, line in raw[1:]:
        s = _Section(path, sname, keys, line)
        i = len(layers)
        if layers and layers[-1].kind == "softmax":
            raise ScError("%s:%d: [softmax] must be the last section" % (path, layers[-1].line))
        if sname not in _KINDS:
            raise ScError("%s:%d: unknown section [%s]" % (path, line, sname))
        s.get_any("parallel")  # starconv's per-layer distribution: nothing to do here
        src = _resolve(layers, i - 1)
        if sname == "connected":
            if not flat:
                torch_index += 1  # the nn.Flatten before the first [connected]
        elif flat and sname != "softmax":
            raise ScError("%s:%d: [%s] after [connected] is not supported" % (path, line, sname))
        if sname in ("route", "shortcut"):
            ref = _layer_ref(s, "layers" if sname == "route" else "from", i)
        shape = layers[src].out if src >= 0 else (c, h, w)  # input: (c, h, w) or (n,) once flat
        common = dict(index=i, line=line, src=src, torch_index=torch_index)
        if sname == "convolutional":
            f = s.get_int("filters", None, 1, 1 << 20)
            k = s.get_int("size", None, 1, 1024)
            st = s.get_int("stride", 1, 1, 1024)
            p = s.get_int("pad", 0, 0, 1024)
            bias = s.get_int("bias", 1, 0, 1)
            act = s.get_str("activation", "linear", ("relu", "linear"))
            oh, ow = _out_size(shape[1], k, st, p), _out_size(shape[2], k, st, p)
            if oh < 1 or ow < 1:
                raise ScError("%s:%d: kernel %d larger than the padded input %dx%d" % (path, line, k, shape[1], shape[2]))
            layers.append(LayerSpec("conv", cin=shape[0], filters=f, size=k, stride=st, pad=p, bias=bool(bias),
                                    relu=(act == "relu"), out=(f, oh, ow), modules=1 + (act == "relu"), **common))
        elif sname == "batchnorm":
            act = s.get_str("activation", "linear", ("relu", "linear"))
            s.get_str("stats", "sample", ("sample", "local"))  # one process: both are the same here
            layers.append(LayerSpec("batchnorm", channels=shape[0], relu=(act == "relu"), out=shape,
                                    modules=1 + (act == "relu"), **common))
        elif sname in ("maxpool", "avgpool"):
            k = s.get_int("size", None, 1, 1024)
            st = s.get_int("stride", k, 1, 1024)
            p = s.get_int("pad", 0, 0, 1024)
            if 2 * p > k:
                raise ScError("%s:%d: pad=%d must be at most size/2" % (path, line, p))
            oh, ow = _out_size(shape[1], k, st, p), _out_size(shape[2], k, st, p)
            if oh < 1 or ow < 1:
                raise ScError("%s:%d: pool size %d larger than the padded input %dx%d" % (path, line, k, shape[1], shape[2]))
            layers.append(LayerSpec(sname, size=k, stride=st, pad=p, out=(shape[0], oh, ow), modules=1, **common))
        elif sname == "global_avgpool":
            layers.append(LayerSpec("gap", out=(shape[0], 1, 1), modules=1, **common))
        elif sname == "connected":
            o = s.get_int("output", None, 1, 1 << 24)
            act = s.get_str("activation", "linear", ("relu", "linear"))
            nin = _prod(shape)
            layers.append(LayerSpec("connected", inputs=nin, output=o, relu=(act == "relu"), flatten=not flat,
                                    out=(o,), modules=1 + (act == "relu"), **common))
            flat = True
        elif sname == "route":
            common["src"] = _resolve(layers, ref)  # a route to a route is the latter's target
            layers.append(LayerSpec("route", target=common["src"], out=layers[common["src"]].out, modules=0,
                                    **common))
        elif sname == "shortcut":
            act = s.get_str("activation", "linear", ("relu", "linear"))
            src2 = _resolve(layers, ref)
            if tuple(layers[src2].out) != tuple(shape):
                raise ScError("%s:%d: [shortcut] adds %s (layer %d) to %s (layer %d): the shapes must be equal "
                              "(project with a 1x1 [convolutional] after a [route])"
                              % (path, line, _shape_str(layers[src2].out), src2, _shape_str(shape), src))
            layers.append(LayerSpec("shortcut", src2=src2, relu=(act == "relu"), out=shape, modules=0, **common))
        elif sname == "softmax":
            pp = s.get_int("per_pixel", 0, 0, 1)
            layers.append(LayerSpec("softmax", per_pixel=bool(pp), out=shape, modules=0, **common))
        s.check_unused()
        torch_index += layers[-1].modules
    if not layers or layers[-1].kind != "softmax":
        raise ScError("%s: the last section must be [softmax]" % path)
    for L in layers:  # as starconv: every output feeds some layer (or is the loss)
        used = L.kind in ("softmax", "route")
        used = used or any(M.kind != "route" and L.index in (M.src, getattr(M, "src2", None))
                           for M in layers[L.index + 1:])
        if not used:
            raise ScError("%s:%d: the output of [%s] (layer %d) feeds no layer" % (path, L.line, _section(L), L.index))
    loss = layers[-1]
    shape = loss.out
    if loss.per_pixel:
        if shape[0] != classes:
            raise ScError("%s:%d: [softmax] per_pixel=1 gets %d channels but [net] has classes=%d"
                          % (path, loss.line, shape[0], classes))
    elif _prod(shape) != classes:
        raise ScError("%s:%d: [softmax] gets %s (%d values per sample) but [net] has classes=%d"
                      % (path, loss.line, _shape_str(shape), _prod(shape), classes))
    return ModelSpec(path, c, h, w, classes, layers)


_KINDS = {  # section -> LayerSpec.kind
    "convolutional": "conv", "batchnorm": "batchnorm", "maxpool": "maxpool", "avgpool": "avgpool",
    "global_avgpool": "gap", "connected": "connected", "route": "route", "shortcut": "shortcut",
    "softmax": "softmax"}
_SECTIONS = {kind: section for section, kind in _KINDS.items()}


def _section(L):
    return _SECTIONS[L.kind]


def _resolve(layers, j):
    """Layer j, or its target if it is a route (routes resolve when parsed,
    so one step is enough); -1 (the input) stays -1."""
    if j >= 0 and layers[j].kind == "route":
        return layers[j].target
    return j


def _layer_modules(L):
    """The modules of one layer, in order (their indices: L.torch_index, +1,
    ...); the nn.Flatten before the first [connected] is not among them."""
    if L.kind == "conv":
        mods = [nn.Conv2d(L.cin, L.filters, L.size, L.stride, L.pad, bias=L.bias)]
    elif L.kind == "batchnorm":
        mods = [nn.BatchNorm2d(L.channels, eps=1e-5, momentum=0.1)]
    elif L.kind == "maxpool":
        mods = [nn.MaxPool2d(L.size, L.stride, L.pad)]
    elif L.kind == "avgpool":
        mods = [nn.AvgPool2d(L.size, L.stride, L.pad)]
    elif L.kind == "gap":
        mods = [nn.AdaptiveAvgPool2d(1)]
    elif L.kind == "connected":
        mods = [nn.Linear(L.inputs, L.output)]
    else:  # route, shortcut, softmax (the loss is nn.CrossEntropyLoss)
        return []
    if getattr(L, "relu", False):
        mods.append(nn.ReLU())
    assert len(mods) == L.modules
    return mods


def _needs_flatten(spec):
    """Whole-sample softmax reading a C x H x W output: the logits are flattened."""
    loss = spec.layers[-1]
    return not loss.per_pixel and len(loss.out) == 3


if nn is not None:
    class GraphNet(nn.Module):
        """A model with [route] / [shortcut] layers.

        Every module is registered under its torch index (add_module("3",
        ...)), so that the state_dict names are those of the nn.Sequential
        starconv's checkpoints are named after; forward walks the layers in
        file order, keeping the outputs that later layers read."""

        def __init__(self, spec):
            super().__init__()
            self.plan = []  # per layer: (kind, src, src2, relu, [module names])
            last_use = {}
            for L in spec.layers:
                if L.kind == "route":  # its readers read its target
                    continue
                for j in (L.src, getattr(L, "src2", -1)):
                    if j >= 0:
                        last_use[j] = L.index
            for L in spec.layers:
                names = []
                if L.kind == "connected" and L.flatten:
                    self.add_module(str(L.torch_index - 1), nn.Flatten())
                    names.append(str(L.torch_index - 1))
                for k, m in enumerate(_layer_modules(L)):
                    self.add_module(str(L.torch_index + k), m)
                    names.append(str(L.torch_index + k))
                self.plan.append((L.kind, L.src, getattr(L, "src2", -1), bool(getattr(L, "relu", False)), names))
            # outputs that may be dropped after layer i: those last read there
            self.drop = [[j for j, u in last_use.items() if u == i] for i in range(len(spec.layers))]
            self.flatten_logits = _needs_flatten(spec)

        def forward(self, x):
            outs = {}
            y = x
            for i, (kind, src, src2, relu, names) in enumerate(self.plan):
                if kind == "route":  # nothing to compute: its readers read its target
                    continue
                y = x if src < 0 else outs[src]
                if kind == "shortcut":
                    y = y + outs[src2]
                    if relu:
                        y = torch.relu(y)
                for name in names:
                    y = self._modules[name](y)
                for j in self.drop[i]:
                    del outs[j]
                outs[i] = y
            if self.flatten_logits:
                y = torch.flatten(y, 1)
            return y


def build_model(spec):
    """ModelSpec (or cfg path) -> nn.Module in the layer order of the file.

    A chain (no [route] nor [shortcut]) gives an nn.Sequential; otherwise a
    GraphNet, whose modules have the same names.  Either way the state_dict
    names are starconv's checkpoint names (see parse_model_text)."""
    if isinstance(spec, str):
        spec = load_cfg(spec)
    if spec.is_graph:
        return GraphNet(spec)
    mods = []
    for L in spec.layers:
        if L.kind == "connected" and L.flatten:
            mods.append(nn.Flatten())
        assert len(mods) == L.torch_index
        mods.extend(_layer_modules(L))
    if _needs_flatten(spec):
        mods.append(nn.Flatten())  # no parameters: the names do not change
    return nn.Sequential(*mods)


def describe(spec):
    lines = ["%s: input %dx%dx%d, %d classes" % (spec.path, spec.channels, spec.height, spec.width, spec.classes)]
    for L in spec.layers:
        note = ""
        if L.kind == "route":
            note = " (layer %d's output)" % L.target
        elif L.kind == "shortcut":
            note = " (layer %d + layer %d%s)" % (L.src, L.src2, ", relu" if L.relu else "")
        elif L.kind == "softmax" and L.per_pixel:
            note = " (per pixel)"
        lines.append("  line %3d %-10s -> %s%s" % (L.line, L.kind, _shape_str(L.out), note))
    model = build_model(spec)
    total = 0
    params = dict(model.named_parameters())
    for name, p in model.state_dict().items():
        if name in params:
            total += p.numel()
            lines.append("  %-10s %s" % (name, list(p.shape)))
        else:
            lines.append("  %-10s %s (buffer)" % (name, list(p.shape)))
    lines.append("  %d parameters" % total)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# IDX data sets

def _read_maybe_gz(path):
    for p in (path + ".gz", path):
        if os.path.isfile(p):
            try:
                if p.endswith(".gz"):
                    with gzip.open(p, "rb") as f:
                        return p, f.read()
                with open(p, "rb") as f:
                    return p, f.read()
            except (OSError, EOFError) as e:
                raise ScError("%s: cannot read: %s" % (p, e))
    raise ScError("%s[.gz]: no such file (Debian package dataset-fashion-mnist)" % path)


def read_idx(path):
    """One IDX file (uint8 data) -> (dims, bytes); path may omit '.gz'."""
    path, data = _read_maybe_gz(path)
    if len(data) < 4:
        raise ScError("%s: truncated IDX header" % path)
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08 or ndim < 1:
        raise ScError("%s: bad IDX magic number 0x%08x" % (path, struct.unpack(">I", data[:4])[0]))
    if len(data) < 4 + 4 * ndim:
        raise ScError("%s: truncated IDX header" % path)
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    n = 1
    for d in dims:
        n *= d
    body = data[4 + 4 * ndim:]
    if len(body) != n:
        raise ScError("%s: %d data bytes, expected %d for dims %s" % (path, len(body), n, dims))
    return dims, body


def load_idx(data_dir=None, prefix="train"):
    """Load <dir>/<prefix>-{images-idx3,labels-idx1}-ubyte[.gz].

    Returns (images uint8 tensor [N, 1, H, W], labels int64 tensor [N])."""
    data_dir = data_dir or os.environ.get("STARCONV_DATA") or DEFAULT_DATA_DIR
    if not os.path.isdir(data_dir):
        raise ScError("%s: no such directory (Debian package dataset-fashion-mnist)" % data_dir)
    ipath = os.path.join(data_dir, prefix + "-images-idx3-ubyte")
    lpath = os.path.join(data_dir, prefix + "-labels-idx1-ubyte")
    idims, ibytes = read_idx(ipath)
    ldims, lbytes = read_idx(lpath)
    if len(idims) != 3:
        raise ScError("%s: expected 3 dimensions, got %d" % (ipath, len(idims)))
    if len(ldims) != 1:
        raise ScError("%s: expected 1 dimension, got %d" % (lpath, len(ldims)))
    if idims[0] != ldims[0]:
        raise ScError("%s: %d images but %d labels" % (ipath, idims[0], ldims[0]))
    images = torch.frombuffer(bytearray(ibytes), dtype=torch.uint8).reshape(idims[0], 1, idims[1], idims[2])
    labels = torch.frombuffer(bytearray(lbytes), dtype=torch.uint8).to(torch.int64)
    if labels.numel() and int(labels.max()) >= 10:
        raise ScError("%s: label %d >= 10" % (lpath, int(labels.max())))
    return images, labels


def to_input(images_u8):
    """uint8 pixels -> float32 pixel/255 (exactly starconv's x = p / 255.0f)."""
    return images_u8.to(torch.float32).div_(255.0)


def batch_range(i, batch, n):
    """Samples of global batch i, in order without shuffling: [i*B, (i+1)*B),
    wrapping around by whole epochs of n // B batches (the last partial batch
    of an epoch is dropped)."""
    per_epoch = n // batch
    if per_epoch < 1:
        raise ScError("batch %d larger than the data set (%d samples)" % (batch, n))
    start = (i % per_epoch) * batch
    return start, start + batch


# ---------------------------------------------------------------------------
# safetensors (pure Python)

ST_DTYPES = {  # name -> (bytes per element, struct code)
    "F64": (8, "d"), "F32": (4, "f"), "I64": (8, "q"), "I32": (4, "i"),
    "I16": (2, "h"), "I8": (1, "b"), "U8": (1, "B"), "BOOL": (1, "?"),
}


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def st_read(path):
    """Read and validate a safetensors file.

    Returns (tensors, metadata): tensors is a dict name -> (dtype, shape list,
    raw little-endian bytes), in file order; metadata is the "__metadata__"
    dict (or {})."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ScError("%s: %s" % (path, e.strerror))
    if len(data) < 8:
        raise ScError("%s: truncated (no header length)" % path)
    (hlen,) = struct.unpack("<Q", data[:8])
    if hlen > len(data) - 8:
        raise ScError("%s: header length %d beyond the end of the file" % (path, hlen))
    try:
        header = json.loads(data[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ScError("%s: malformed JSON header: %s" % (path, e))
    if not isinstance(header, dict):
        raise ScError("%s: the header is not a JSON object" % path)
    body = memoryview(data)[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    spans = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise ScError("%s: tensor '%s': expected keys dtype, shape, data_offsets" % (path, name))
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in ST_DTYPES:
            raise ScError("%s: tensor '%s': unsupported dtype %r" % (path, name, dtype))
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ScError("%s: tensor '%s': bad shape %r" % (path, name, shape))
        if (not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)
                or not 0 <= offs[0] <= offs[1] <= len(body)):
            raise ScError("%s: tensor '%s': data_offsets %r outside the %d-byte data section"
                          % (path, name, offs, len(body)))
        need = _prod(shape) * ST_DTYPES[dtype][0]
        if offs[1] - offs[0] != need:
            raise ScError("%s: tensor '%s': %d bytes for %s %s, expected %d"
                          % (path, name, offs[1] - offs[0], dtype, shape, need))
        spans.append((offs[0], offs[1], name))
        out[name] = (dtype, list(shape), bytes(body[offs[0]:offs[1]]))
    spans.sort()
    for a, b in zip(spans, spans[1:]):
        if b[0] < a[1]:
            raise ScError("%s: tensors '%s' and '%s' overlap" % (path, a[2], b[2]))
    return out, meta


def st_write(path, tensors, metadata=None):
    """Write a safetensors file atomically (temporary file, fsync, rename).

    tensors: iterable of (name, dtype, shape, raw little-endian bytes) or a
    dict name -> (dtype, shape, bytes).  The JSON header is padded with spaces
    to a multiple of 8 bytes; data is laid out in the given order."""
    items = tensors.items() if isinstance(tensors, dict) else [(t[0], t[1:]) for t in tensors]
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    off = 0
    for name, (dtype, shape, raw) in items:
        if dtype not in ST_DTYPES:
            raise ScError("%s: tensor '%s': unsupported dtype %r" % (path, name, dtype))
        shape = [int(d) for d in shape]
        raw = bytes(raw)
        if len(raw) != _prod(shape) * ST_DTYPES[dtype][0]:
            raise ScError("%s: tensor '%s': %d bytes for %s %s" % (path, name, len(raw), dtype, shape))
        if name in header:
            raise ScError("%s: duplicate tensor name '%s'" % (path, name))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_TORCH_DTYPES = {}


def _torch_dtypes():
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update({
            "F64": torch.float64, "F32": torch.float32, "I64": torch.int64, "I32": torch.int32,
            "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool})
    return _TORCH_DTYPES


def st_read_torch(path):
    """safetensors file -> (dict name -> torch tensor, metadata)."""
    if sys.byteorder != "little":
        raise ScError("big-endian hosts are not supported")
    raw, meta = st_read(path)
    dts = _torch_dtypes()
    out = {}
    for name, (dtype, shape, data) in raw.items():
        if len(data) == 0:
            out[name] = torch.zeros(shape, dtype=dts[dtype])
        else:
            out[name] = torch.frombuffer(bytearray(data), dtype=dts[dtype]).reshape(shape).clone()
    return out, meta


def st_write_torch(path, tensors, metadata=None):
    """dict name -> torch tensor (float32 or int64 ...) -> safetensors file."""
    if sys.byteorder != "little":
        raise ScError("big-endian hosts are not supported")
    rev = {v: k for k, v in _torch_dtypes().items()}
    items = []
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in rev:
            raise ScError("%s: tensor '%s': unsupported dtype %s" % (path, name, t.dtype))
        items.append((name, rev[t.dtype], list(t.shape), t.numpy().tobytes()))
    st_write(path, items, metadata)


# ---------------------------------------------------------------------------
# Checkpoints: model parameters plus SGD state

def optimizer_names(model):
    """Checkpoint names of the momentum buffers: optimizer.<param>.momentum_buffer."""
    return {name: "optimizer.%s.momentum_buffer" % name for name, _ in model.named_parameters()}


def save_checkpoint(path, model, optimizer=None, iteration=0, metadata=None):
    """Write parameters (state_dict names), momentum buffers (zeros where the
    optimizer has none yet) and optimizer.iteration (I64, shape [])."""
    tensors = {name: p.detach() for name, p in model.state_dict().items()}
    for pname, p in model.named_parameters():
        buf = None
        if optimizer is not None:
            buf = optimizer.state.get(p, {}).get("momentum_buffer")
        tensors["optimizer.%s.momentum_buffer" % pname] = (
            buf.detach() if buf is not None else torch.zeros_like(p.detach()))
    tensors["optimizer.iteration"] = torch.tensor(int(iteration), dtype=torch.int64)
    st_write_torch(path, tensors, metadata)


def buffer_names(model):
    """Names of the state_dict entries that are buffers, not parameters:
    batch normalization's running_mean, running_var (float32) and
    num_batches_tracked (int64, shape [])."""
    params = set(name for name, _ in model.named_parameters())
    return [name for name in model.state_dict() if name not in params]


def checkpoint_tensor(path, name, t, ref):
    """Check checkpoint tensor t against the model's ref (same name): float32
    of the same shape, or for an int64 ref (num_batches_tracked) one integer.
    Returns t as the model holds it."""
    if ref.dtype == torch.int64:
        if t.numel() != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ScError("%s: tensor '%s' is %s %s, expected one integer" % (path, name, t.dtype, list(t.shape)))
        return t.reshape(ref.shape).to(torch.int64)
    if t.dtype != torch.float32 or list(t.shape) != list(ref.shape):
        raise ScError("%s: tensor '%s' is %s %s, expected float32 %s"
                      % (path, name, t.dtype, list(t.shape), list(ref.shape)))
    return t


def load_checkpoint(path, model, optimizer=None, require_optimizer=False):
    """Load parameters into model (names and shapes must match exactly) and,
    when present, momentum buffers into optimizer (torch.optim.SGD).
    Batch normalization buffers (running_mean, running_var,
    num_batches_tracked) that the checkpoint lacks (older checkpoints) keep
    PyTorch's defaults, with a warning on stderr for each.
    Returns the checkpoint's optimizer.iteration (0 when absent)."""
    tensors, _ = st_read_torch(path)
    sd = model.state_dict()
    buffers = set(buffer_names(model))
    new_sd = {}
    for name, ref in sd.items():
        if name not in tensors:
            if name in buffers:
                print("sc_torch: warning: %s: no tensor '%s' (older checkpoint?), keeping PyTorch's default"
                      % (path, name), file=sys.stderr)
                new_sd[name] = ref
                continue
            raise ScError("%s: no tensor '%s' (checkpoint of another model?)" % (path, name))
        new_sd[name] = checkpoint_tensor(path, name, tensors[name], ref)
    # optimizer.seed, .global_batch, .train_samples, .shuffle, .accumulate: starconv's
    # data order for --resume; nothing PyTorch's side uses.
    known = (set(sd) | {"optimizer.iteration"} | set(optimizer_names(model).values())
             | {"optimizer.seed", "optimizer.global_batch", "optimizer.train_samples", "optimizer.shuffle",
                "optimizer.accumulate"})
    extra = [n for n in tensors if n not in known]
    if extra:
        raise ScError("%s: unexpected tensor(s) %s (checkpoint of another model?)" % (path, ", ".join(extra)))
    model.load_state_dict(new_sd)
    params = dict(model.named_parameters())
    for pname, bname in optimizer_names(model).items():
        if bname not in tensors:
            if require_optimizer:
                raise ScError("%s: no tensor '%s'" % (path, bname))
            continue
        b = tensors[bname]
        if b.dtype != torch.float32 or list(b.shape) != list(params[pname].shape):
            raise ScError("%s: tensor '%s' is %s %s, expected float32 %s"
                          % (path, bname, b.dtype, list(b.shape), list(params[pname].shape)))
        if optimizer is not None:
            optimizer.state[params[pname]]["momentum_buffer"] = b.clone()
    it = 0
    if "optimizer.iteration" in tensors:
        t = tensors["optimizer.iteration"]
        if t.numel() != 1 or t.dtype.is_floating_point:
            raise ScError("%s: optimizer.iteration must be one integer" % path)
        it = int(t.reshape(-1)[0])
    return it


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: sc_torch.py MODEL.cfg|NAME ...  (prints layers and parameter names)")
    try:
        for arg in sys.argv[1:]:
            print(describe(load_cfg(arg)))
    except ScError as e:
        sys.exit("sc_torch: %s" % e)
