"""PyTorch side of starconv's benchmarks and cross-checks.

Shared helpers for bench/torch_ddp.py and bench/torch_check.py:

  * load_cfg(path) / build_model(cfg): starconv's Darknet-style .cfg file ->
    nn.Sequential with the same layers, in the same order, so that the
    state_dict names ("0.weight", "0.bias", "3.weight", ...) are the names of
    starconv's checkpoint tensors;
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

    def check_unused(self):
        for key, (_, line) in self.keys.items():
            if key not in self.used:
                raise ScError("%s:%d: unknown key '%s' in [%s]" % (self.path, line, key, self.name))


class LayerSpec:
    """One layer of a model: kind in conv/maxpool/avgpool/connected/softmax."""

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


def load_cfg(path):
    """Read and check a model file; returns a ModelSpec with output shapes."""
    path = resolve_model(path)
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScError("%s: %s" % (path, e.strerror))
    return parse_model_text(text, path)


def parse_model_text(text, path="<string>"):
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
    shape = (c, h, w)  # current activation: (c, h, w) or (n,) once flat
    for sname, keys, line in raw[1:]:
        s = _Section(path, sname, keys, line)
        if layers and layers[-1].kind == "softmax":
            raise ScError("%s:%d: [softmax] must be the last section" % (path, layers[-1].line))
        if sname == "convolutional":
            if len(shape) != 3:
                raise ScError("%s:%d: [convolutional] after [connected]" % (path, line))
            f = s.get_int("filters", None, 1, 1 << 20)
            k = s.get_int("size", None, 1, 1024)
            st = s.get_int("stride", 1, 1, 1024)
            p = s.get_int("pad", 0, 0, 1024)
            act = s.get_str("activation", "linear", ("relu", "linear"))
            oh, ow = _out_size(shape[1], k, st, p), _out_size(shape[2], k, st, p)
            if oh < 1 or ow < 1:
                raise ScError("%s:%d: kernel %d larger than the padded input %dx%d" % (path, line, k, shape[1], shape[2]))
            layers.append(LayerSpec("conv", line=line, cin=shape[0], filters=f, size=k, stride=st,
                                    pad=p, relu=(act == "relu"), out=(f, oh, ow)))
        elif sname in ("maxpool", "avgpool"):
            if len(shape) != 3:
                raise ScError("%s:%d: [%s] after [connected]" % (path, line, sname))
            k = s.get_int("size", None, 1, 1024)
            st = s.get_int("stride", k, 1, 1024)
            p = s.get_int("pad", 0, 0, 1024)
            if 2 * p > k:
                raise ScError("%s:%d: pad=%d must be at most size/2" % (path, line, p))
            oh, ow = _out_size(shape[1], k, st, p), _out_size(shape[2], k, st, p)
            if oh < 1 or ow < 1:
                raise ScError("%s:%d: pool size %d larger than the padded input %dx%d" % (path, line, k, shape[1], shape[2]))
            layers.append(LayerSpec(sname, line=line, size=k, stride=st, pad=p, out=(shape[0], oh, ow)))
        elif sname == "connected":
            o = s.get_int("output", None, 1, 1 << 24)
            act = s.get_str("activation", "linear", ("relu", "linear"))
            nin = shape[0] * shape[1] * shape[2] if len(shape) == 3 else shape[0]
            layers.append(LayerSpec("connected", line=line, inputs=nin, output=o, relu=(act == "relu"),
                                    flatten=(len(shape) == 3), out=(o,)))
        elif sname == "softmax":
            layers.append(LayerSpec("softmax", line=line, out=shape))
        else:
            raise ScError("%s:%d: unknown section [%s]" % (path, line, sname))
        s.check_unused()
        shape = layers[-1].out
    if not layers or layers[-1].kind != "softmax":
        raise ScError("%s: the last section must be [softmax]" % path)
    if len(shape) != 1 or shape[0] != classes:
        raise ScError("%s: the output before [softmax] has shape %s, expected (%d,) (classes)"
                      % (path, "x".join(map(str, shape)), classes))
    return ModelSpec(path, c, h, w, classes, layers)


def build_model(spec):
    """ModelSpec (or cfg path) -> nn.Sequential in the layer order of the file."""
    if isinstance(spec, str):
        spec = load_cfg(spec)
    mods = []
    for L in spec.layers:
        if L.kind == "conv":
            mods.append(nn.Conv2d(L.cin, L.filters, L.size, L.stride, L.pad))
            if L.relu:
                mods.append(nn.ReLU())
        elif L.kind == "maxpool":
            mods.append(nn.MaxPool2d(L.size, L.stride, L.pad))
        elif L.kind == "avgpool":
            mods.append(nn.AvgPool2d(L.size, L.stride, L.pad))
        elif L.kind == "connected":
            if L.flatten:
                mods.append(nn.Flatten())
            mods.append(nn.Linear(L.inputs, L.output))
            if L.relu:
                mods.append(nn.ReLU())
        # softmax: nothing, the loss is nn.CrossEntropyLoss
    return nn.Sequential(*mods)


def describe(spec):
    lines = ["%s: input %dx%dx%d, %d classes" % (spec.path, spec.channels, spec.height, spec.width, spec.classes)]
    for L in spec.layers:
        lines.append("  line %3d %-10s -> %s" % (L.line, L.kind, "x".join(map(str, L.out))))
    model = build_model(spec)
    total = 0
    for name, p in model.state_dict().items():
        total += p.numel()
        lines.append("  %-10s %s" % (name, list(p.shape)))
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


def load_checkpoint(path, model, optimizer=None, require_optimizer=False):
    """Load parameters into model (names and shapes must match exactly) and,
    when present, momentum buffers into optimizer (torch.optim.SGD).
    Returns the checkpoint's optimizer.iteration (0 when absent)."""
    tensors, _ = st_read_torch(path)
    sd = model.state_dict()
    for name, ref in sd.items():
        if name not in tensors:
            raise ScError("%s: no tensor '%s' (checkpoint of another model?)" % (path, name))
        t = tensors[name]
        if t.dtype != torch.float32 or list(t.shape) != list(ref.shape):
            raise ScError("%s: tensor '%s' is %s %s, expected float32 %s"
                          % (path, name, t.dtype, list(t.shape), list(ref.shape)))
    known = set(sd) | {"optimizer.iteration"} | set(optimizer_names(model).values())
    extra = [n for n in tensors if n not in known]
    if extra:
        raise ScError("%s: unexpected tensor(s) %s (checkpoint of another model?)" % (path, ", ".join(extra)))
    model.load_state_dict({name: tensors[name] for name in sd})
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
