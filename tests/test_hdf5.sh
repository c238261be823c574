# HDF5 data sets (--data hdf5:FILE, src/data/hdf5.c) against the data they
# hold, written by an independent writer (h5py) and by starconv-data:
# - a Fashion-MNIST subset as IDX files and as HDF5 files (contiguous;
#   chunked and gzipped; float32 holding the scaled pixels) trains to the
#   same checkpoint bytes on 1 rank, 2 ranks (n2) and 4 ranks (h2w2);
#   float16 trains as the same values stored as float32;
# - starconv-data's copies of the IDX files and of synthetic-mesh:128 equal
#   the sources (arrays by h5py; training: the same tensors bit for bit);
# - under h2w2 each rank reads a quarter of each sample it loads (the
#   bytes --report counts), under n4 whole samples;
# - bad files and specs: one line, exit status 2, no checkpoint;
# - HDF5 is a module that only runs reading HDF5 load: starconv-train does
#   not link it, and a module that cannot be loaded is one line, exit 2.
# Skipped (77) without HDF5 in the build (after checking its message) or
# without h5py (Debian: python3-h5py).
. "$TOP_SRCDIR/tests/common.sh"

CONV="$TOP_BUILDDIR/starconv-data"
PY=/usr/bin/python3

# expect NAME PATTERN NP ARGS...: exit status 2, one error line with the
# pattern, no checkpoint written.
expect() {
  name=$1 pattern=$2 np=$3
  shift 3
  rm -f "$WORK/out.safetensors"
  STARPU_NCPU=1 "$MPIRUN" "$np" "$TRAIN" --save "$WORK/out.safetensors" "$@" >"$WORK/stdout" 2>"$WORK/stderr"
  rc=$?
  line=$(grep '^starconv-train: ' "$WORK/stderr")
  nlines=$(printf '%s\n' "$line" | grep -c .)
  if [ $rc -eq 2 ] && [ "$nlines" -eq 1 ] && printf '%s\n' "$line" | grep -q -- "$pattern" &&
    [ ! -e "$WORK/out.safetensors" ]; then
    ok "$name: $line"
  else
    fail "$name: status $rc (want 2), error lines: $nlines, want /$pattern/"
    cat "$WORK/stderr"
  fi
}

L="--model $MODELS/lenet.cfg --iters 1"
if ! grep -q '^#define SC_USE_HDF5 1' "$TOP_BUILDDIR/config.h" 2>/dev/null; then
  expect "a build without HDF5" "built without HDF5 (install the Debian package libhdf5-openmpi-dev" 1 $L \
    --data "hdf5:$WORK/x.h5"
  [ "$failures" -eq 0 ] || finish
  echo "SKIP: built without HDF5 (libhdf5-openmpi-dev)"
  exit 77
fi
if ! $PY -c 'import h5py, numpy' 2>/dev/null; then
  echo "SKIP: no h5py (Debian package python3-h5py)"
  exit 77
fi

# A subset of Fashion-MNIST as IDX files (the reference) and, by h5py, as
# HDF5 files of several layouts and types.
NTRAIN=256 NTEST=64
$PY - "$DATA" "$WORK" $NTRAIN $NTEST <<'EOF' || fail "writing the test files"
import gzip, os, sys
import h5py, numpy as np
src, work, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def idx(name, offset):
    for p in (os.path.join(src, name + '.gz'), os.path.join(src, name)):
        if os.path.exists(p):
            with (gzip.open(p) if p.endswith('.gz') else open(p, 'rb')) as f:
                return np.frombuffer(f.read(), np.uint8, offset=offset)
    sys.exit('missing ' + name)
parts = {}
for prefix, n in (('train', ntrain), ('t10k', ntest)):
    images = idx(prefix + '-images-idx3-ubyte', 16).reshape(-1, 1, 28, 28)[:n]
    labels = idx(prefix + '-labels-idx1-ubyte', 8)[:n]
    parts[prefix] = (images, labels)
os.makedirs(os.path.join(work, 'idx'))
for prefix, (images, labels) in parts.items():
    head = np.array([0x803, len(images), 28, 28], '>u4').tobytes()
    open(os.path.join(work, 'idx', prefix + '-images-idx3-ubyte'), 'wb').write(head + images.tobytes())
    head = np.array([0x801, len(labels)], '>u4').tobytes()
    open(os.path.join(work, 'idx', prefix + '-labels-idx1-ubyte'), 'wb').write(head + labels.tobytes())
(ti, tl), (vi, vl) = parts['train'], parts['t10k']
def write(name, images, test_images, **kw):
    with h5py.File(os.path.join(work, name), 'w') as f:
        f.create_dataset('images', data=images, **kw)
        f.create_dataset('labels', data=tl)
        f.create_dataset('test_images', data=test_images, **kw)
        f.create_dataset('test_labels', data=vl)
write('plain.h5', ti, vi)
write('gzip.h5', ti, vi, chunks=(16, 1, 14, 28), compression='gzip', compression_opts=4)
scale = lambda a: a.astype(np.float32) / np.float32(255)
write('f32.h5', scale(ti), scale(vi))
h16, v16 = scale(ti).astype(np.float16), scale(vi).astype(np.float16)
write('f16.h5', h16, v16, chunks=(8, 1, 28, 28))
write('f16as32.h5', h16.astype(np.float32), v16.astype(np.float32))
# bad files
def bad(name, **sets):
    with h5py.File(os.path.join(work, name), 'w') as f:
        for k, v in sets.items():
            f.create_dataset(k, data=v)
bad('rank3.h5', images=ti[:, 0], labels=tl)
bad('int16.h5', images=ti.astype(np.int16), labels=tl)
bad('float64.h5', images=ti.astype(np.float64), labels=tl)
bad('fewer.h5', images=ti, labels=tl[:-1])
bad('float_labels.h5', images=ti, labels=tl.astype(np.float32))
bad('shape.h5', images=np.zeros((8, 1, 32, 32), np.uint8), labels=tl[:8])
bad('pixels.h5', images=ti[:8], labels=np.zeros((8, 2, 2), np.uint8))
bad('negative.h5', images=ti[:8], labels=np.array([0, 1, -1, 2, 0, 0, 0, 0], np.int8))
with h5py.File(os.path.join(work, 'range.h5'), 'w') as f:
    f['images'] = ti[:8]
    f['labels'] = np.array([0, 1, 10, 2, 0, 0, 0, 0], np.uint8)
    f['labels'].attrs['classes'] = 10
bad('notest.h5', images=ti[:8], labels=tl[:8])
bad('mesh_sample_labels.h5', images=np.zeros((2, 18, 128, 128), np.float32), labels=np.array([0, 1], np.uint8))
with h5py.File(os.path.join(work, 'group.h5'), 'w') as f:
    f.create_group('images')
    f['labels'] = tl
EOF

common="--batch 16 --lr 0.05 --momentum 0.9 --seed 5 --epochs 1 --iters 4"
# train NAME NP DATA ARGS...: a run saved as NAME
train() {
  name=$1 np=$2 data=$3
  shift 3
  STARPU_NCPU=1 "$MPIRUN" "$np" "$TRAIN" --data "$data" $common --save "$WORK/$name.st" "$@" >"$WORK/$name.log" 2>&1 ||
    { fail "$name: the run failed"; tail -3 "$WORK/$name.log"; }
}
# same A B WHAT: checkpoints A and B are the same bytes
same() {
  if [ -s "$WORK/$1.st" ] && cmp -s "$WORK/$1.st" "$WORK/$2.st"; then ok "$3"; else fail "$3"; fi
}

train idx1 1 "$WORK/idx" --model "$MODELS/lenet.cfg"
train plain1 1 "hdf5:$WORK/plain.h5" --model "$MODELS/lenet.cfg"
train gzip1 1 "hdf5:$WORK/gzip.h5" --model "$MODELS/lenet.cfg"
train f32 1 "hdf5:$WORK/f32.h5" --model "$MODELS/lenet.cfg"
same idx1 plain1 "1 rank: HDF5 (uint8, contiguous) = IDX, checkpoint bytes"
same idx1 gzip1 "1 rank: HDF5 (uint8, chunked, gzip) = IDX"
same idx1 f32 "1 rank: HDF5 float32 holding pixel/255 = IDX"
acc() { sed -n 's/^epoch 1: test accuracy \([0-9.]*%\).*/\1/p' "$WORK/$1.log"; }
a=$(acc idx1) b=$(acc gzip1)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "held-out set (test_images): test accuracy $a from both" ||
  fail "test accuracy: IDX '$a', HDF5 '$b'"
train f16 1 "hdf5:$WORK/f16.h5" --model "$MODELS/lenet.cfg"
train f16as32 1 "hdf5:$WORK/f16as32.h5" --model "$MODELS/lenet.cfg"
same f16as32 f16 "float16 trains as its values stored as float32"
if cmp -s "$WORK/f16.st" "$WORK/f32.st"; then fail "float16 rounding changed nothing (the check cannot fail)"; fi

train idx2 2 "$WORK/idx" --model "$MODELS/lenet.cfg"
train gzip2 2 "hdf5:$WORK/gzip.h5" --model "$MODELS/lenet.cfg"
same idx2 gzip2 "2 ranks (n2): HDF5 (gzip) = IDX"
S="--model $TOP_SRCDIR/tests/models/spatial.cfg --parallel h2w2 --test off"
train idx4 4 "$WORK/idx" $S
train gzip4 4 "hdf5:$WORK/gzip.h5" $S --report
same idx4 gzip4 "4 ranks (h2w2): HDF5 (chunks of half samples, gzip) = IDX"

# bytes read: the --report table's "of a sample" column, per rank
shares() { awk '/^  rank +bytes/ { on = 1; next } on && NF == 5 { printf "%s ", $4 }' "$WORK/$1.log"; }
s4=$(shares gzip4)
train plain_n4 4 "hdf5:$WORK/plain.h5" --model "$MODELS/lenet.cfg" --test off --report
sn=$(shares plain_n4)
[ "$s4" = "25.0% 25.0% 25.0% 25.0% " ] && ok "h2w2: each rank read a quarter of every sample it loaded ($s4)" ||
  fail "h2w2: the ranks read '$s4' of a sample, want 25.0% each"
[ "$sn" = "100.0% 100.0% 100.0% 100.0% " ] && ok "n4: whole samples ($sn)" || fail "n4: '$sn' of a sample"

# starconv-data: the IDX files as HDF5, checked by h5py against the IDX
# files, and training on them
if "$CONV" --data "$WORK/idx" --out "$WORK/conv.h5" >"$WORK/conv.log" 2>&1 &&
  $PY - "$WORK" <<'EOF'; then
import sys, h5py, numpy as np
w = sys.argv[1]
with h5py.File(w + '/conv.h5') as a, h5py.File(w + '/plain.h5') as b:
    for k in ('images', 'labels', 'test_images', 'test_labels'):
        assert a[k].dtype == np.uint8 and np.array_equal(a[k][:], b[k][:]), k
    assert a['labels'].attrs['classes'] == 10
EOF
  ok "starconv-data: the IDX files as HDF5 (uint8, classes=10), as h5py reads them"
else
  fail "starconv-data from IDX files"
  cat "$WORK/conv.log"
fi
train conv1 1 "hdf5:$WORK/conv.h5" --model "$MODELS/lenet.cfg"
same idx1 conv1 "training on starconv-data's file = IDX"

# starconv-data's synthetic-mesh:128 against the generator: the same
# tensors bit for bit (the saved sample count differs), on 1 rank and h2w2
"$CONV" --data synthetic-mesh:128 --samples 4 --test-samples 2 --gzip 1 --model "$MODELS/mesh128.cfg" \
  --out "$WORK/mesh.h5" >"$WORK/conv.log" 2>&1 || { fail "starconv-data synthetic-mesh:128"; cat "$WORK/conv.log"; }
mesh="--model $MODELS/mesh128.cfg --batch 2 --lr 0.05 --momentum 0.9 --shuffle off --test off --iters 2"
for grid in n1 h2w2; do
  np=1
  [ $grid = h2w2 ] && np=4
  STARPU_NCPU=1 "$MPIRUN" $np "$TRAIN" $mesh --parallel $grid --data synthetic-mesh:128 --save "$WORK/ms.st" \
    >"$WORK/ms.log" 2>&1 || fail "mesh $grid: the synthetic run failed"
  STARPU_NCPU=1 "$MPIRUN" $np "$TRAIN" $mesh --parallel $grid --data "hdf5:$WORK/mesh.h5" --save "$WORK/mh.st" \
    --report >"$WORK/mh.log" 2>&1 || fail "mesh $grid: the HDF5 run failed"
  if "$COMPARE" "$WORK/mh.st" "$WORK/ms.st" 0 ignore=optimizer.train_samples >/dev/null; then
    ok "mesh128 $grid: starconv-data's file trains as synthetic-mesh:128 (every tensor bit for bit)"
  else
    fail "mesh128 $grid: HDF5 differs from synthetic-mesh:128"
  fi
done
s=$(shares mh)
[ "$s" = "25.0% 25.0% 25.0% 25.0% " ] && ok "mesh128 h2w2: a quarter of each sample per rank" ||
  fail "mesh128 h2w2: '$s' of a sample"

# bad input
printf 'not hdf5\n' >"$WORK/text.h5"
head -c 20000 "$WORK/plain.h5" >"$WORK/truncated.h5"
expect "missing file" "$WORK/none.h5: No such file" 1 $L --data "hdf5:$WORK/none.h5"
expect "not an HDF5 file" "text.h5: not an HDF5 file" 1 $L --data "hdf5:$WORK/text.h5"
expect "truncated file" "truncated.h5: not an HDF5 file, or a damaged one (.*truncated" 1 $L \
  --data "hdf5:$WORK/truncated.h5"
expect "missing data set" "plain.h5: no data set 'pictures'" 1 $L --data "hdf5:$WORK/plain.h5:images=pictures"
expect "a group, not a data set" "group.h5: 'images' is not a data set" 1 $L --data "hdf5:$WORK/group.h5"
expect "wrong rank" "rank3.h5: data set 'images' has 3 dimensions, expected 4" 1 $L --data "hdf5:$WORK/rank3.h5"
expect "int16 images" "int16.h5: data set 'images' holds int16 values" 1 $L --data "hdf5:$WORK/int16.h5"
expect "float64 images" "holds float64 values (want uint8, float16 or float32)" 1 $L --data "hdf5:$WORK/float64.h5"
expect "label count" "fewer.h5: data set 'images' has $NTRAIN samples but 'labels' has $((NTRAIN - 1)) labels" 1 $L \
  --data "hdf5:$WORK/fewer.h5"
expect "float labels" "float_labels.h5: data set 'labels' holds float32 values (want an integer type)" 1 $L \
  --data "hdf5:$WORK/float_labels.h5"
expect "label out of range" "range.h5: data set 'labels': label 10 of sample 2 is not below 10" 1 $L \
  --data "hdf5:$WORK/range.h5" --test off
expect "negative label" "negative.h5: data set 'labels': label -1 of sample 2 is below 0" 1 $L \
  --data "hdf5:$WORK/negative.h5" --test off
expect "shape against the model" "samples are 1x32x32 but the model's input is 1x28x28" 1 $L \
  --data "hdf5:$WORK/shape.h5:classes=10" --test off
expect "per-pixel labels for a per-sample loss" "labels are 2x2 a sample but the model's loss takes one label" 1 $L \
  --data "hdf5:$WORK/pixels.h5:classes=10" --test off
expect "per-sample labels for a per-pixel loss" "one label a sample, but the model's per-pixel loss needs N x 2 x 2" 1 \
  --model "$MODELS/mesh128.cfg" --iters 1 --data "hdf5:$WORK/mesh_sample_labels.h5" --test off
expect "no held-out set" "no held-out samples for --test" 1 $L --data "hdf5:$WORK/notest.h5:classes=10"
expect "unknown key" "unknown key 'colour'" 1 $L --data "hdf5:$WORK/plain.h5:colour=blue"
if command -v ldd >/dev/null 2>&1; then
  libs=$(ldd "$TRAIN" | grep -c 'libhdf5') || true
  [ "$libs" -eq 0 ] && ok "starconv-train does not link HDF5 (the module does)" ||
    fail "starconv-train links HDF5: $(ldd "$TRAIN" | grep libhdf5 | tr '\n' ' ')"
fi
SC_HDF5_MODULE="$WORK/no-module.so" expect "a module that cannot be loaded" \
  "cannot load starconv's HDF5 reader: SC_HDF5_MODULE=$WORK/no-module.so" 1 $L --data "hdf5:$WORK/plain.h5"
expect "split too large" "split=$NTRAIN leaves no training samples" 1 $L --data "hdf5:$WORK/plain.h5:split=$NTRAIN"
# a split of the training data set as the held-out set
STARPU_NCPU=1 "$MPIRUN" 1 "$TRAIN" $L --data "hdf5:$WORK/notest.h5:classes=10,split=2" --batch 2 >"$WORK/log" 2>&1 &&
  grep -q "test accuracy" "$WORK/log" && ok "split=2: the last 2 samples held out" || fail "split=2"
# the converter's own bad input: exit status 2, one line, no file
rm -f "$WORK/bad.h5"
"$CONV" --data "$WORK/idx" --samples 100000 --out "$WORK/bad.h5" >/dev/null 2>"$WORK/stderr"
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c . "$WORK/stderr")" -eq 1 ] && grep -q -- "--samples 100000: --data" "$WORK/stderr" &&
  [ -z "$(ls "$WORK" | grep '^bad\.h5')" ]; then
  ok "starconv-data: $(cat "$WORK/stderr")"
else
  fail "starconv-data --samples too many: status $rc"
fi

finish
