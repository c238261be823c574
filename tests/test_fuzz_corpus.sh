# The parsers of untrusted files against the kept fuzz corpus and hostile
# files: every input in fuzz/corpus/<target> goes through its harness
# (fuzz/fuzz_<target>.c, with fuzz/replay.c as main), which aborts when a
# parser crashes or breaks a property (one-line error, bounded sizes); an
# input slower than FUZZ_REPLAY_TIMEOUT (60 s) fails too.  Hostile inputs
# too large to keep (1 MB lines, 10^5 keys or layers) are generated here.
# Then starconv-train itself on hostile --model, --load and --data files:
# exit status 2 and one line on stderr, quickly.
set -u
: "${TOP_BUILDDIR:?run through make check}" "${TOP_SRCDIR:?run through make check}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/starconv-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
CORPUS="$TOP_SRCDIR/fuzz/corpus"
TRAIN="$TOP_BUILDDIR/starconv-train"
failures=0
ok() { echo "ok $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# replay TARGET FILES_OR_DIRS...
replay() {
  target=$1
  shift
  start=$(date +%s)
  if out=$("$TOP_BUILDDIR/tests/fuzz_replay_$target" "$@" 2>"$WORK/replay.err"); then
    ok "$target: $out in $(($(date +%s) - start)) s"
  else
    fail "$target: the last input replayed broke it:"
    tail -n 25 "$WORK/replay.err"
  fi
}

# Large hostile inputs.
big="$WORK/big"
mkdir -p "$big/cfg" "$big/net" "$big/safetensors"
{ printf '[net]\nheight=28\nwidth=28\nnote='; head -c 1000000 /dev/zero | tr '\0' v; printf '\n'; } \
  >"$big/cfg/long-line"
{ printf '[net]\nnote='; head -c 1000000 /dev/zero | tr '\0' v; } >"$big/cfg/long-line-no-newline"
# 10^5 keys in one section: duplicate detection that scans the section is
# quadratic (40 s); under the 1 MiB file limit.
awk 'BEGIN { print "[net]"; for (i = 0; i < 110000; i++) printf "k%d=1\n", i }' >"$big/cfg/many-keys"
awk 'BEGIN { print "[net]"; for (i = 0; i < 250000; i++) print "[a]" }' >"$big/cfg/many-sections"
head -c 1048577 /dev/zero | tr '\0' '#' >"$big/cfg/over-limit"
cp "$big/cfg/"* "$big/net/"
# 8.7 * 10^4 layers: refused before anything is built for them (20 GB and
# minutes for training, quadratic numbering of the layers).
awk 'BEGIN { print "[net]\nchannels=1\nheight=1\nwidth=10"; for (i = 0; i < 87000; i++) print "[batchnorm]"; print "[softmax]" }' \
  >"$big/net/many-layers"
# A 3 MB header of 6 * 10^4 empty tensors, all at offset 0.
awk 'BEGIN { printf "{"; for (i = 0; i < 60000; i++) printf "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", (i ? "," : ""), i; printf "}" }' \
  >"$WORK/header.json"
hlen=$(wc -c <"$WORK/header.json")
# The 8-byte little-endian header length, then the header.
printf "$(printf '\\%03o' $((hlen & 255)) $((hlen >> 8 & 255)) $((hlen >> 16 & 255)) $((hlen >> 24 & 255)) 0 0 0 0)" \
  >"$big/safetensors/many-tensors"
cat "$WORK/header.json" >>"$big/safetensors/many-tensors"

replay cfg "$CORPUS/cfg" "$big/cfg"
replay net "$CORPUS/net" "$big/net"
replay safetensors "$CORPUS/safetensors" "$big/safetensors"
replay idx "$CORPUS/idx"
# HDF5 files (a build with HDF5 only)
[ ! -x "$TOP_BUILDDIR/tests/fuzz_replay_hdf5" ] || replay hdf5 "$CORPUS/hdf5"

# expect NAME ARGS...: starconv-train exits with status 2 within 60 s and
# prints exactly one line, on stderr.
expect() {
  name=$1
  shift
  start=$(date +%s)
  STARPU_SILENT=1 STARPU_NCPU=1 timeout 60 "$TRAIN" --iters 1 "$@" >"$WORK/stdout" 2>"$WORK/stderr"
  rc=$?
  secs=$(($(date +%s) - start))
  nlines=$(wc -l <"$WORK/stderr")
  if [ $rc -eq 2 ] && [ "$nlines" -eq 1 ] && [ ! -s "$WORK/stdout" ] &&
    grep -q '^starconv-train: ' "$WORK/stderr"; then
    ok "$name (${secs}s): $(cut -c 1-160 "$WORK/stderr")"
  else
    fail "$name: status $rc (want 2), $nlines lines on stderr (want 1), ${secs}s:"
    head -c 2000 "$WORK/stderr"
  fi
}

if [ ! -x "$TRAIN" ]; then
  echo "SKIP starconv-train checks: $TRAIN not built"
else
  SYN=synthetic:1x28x28:10
  LENET="$TOP_SRCDIR/models/lenet.cfg"
  for f in regress-cr-inside-line regress-nul-byte regress-unknown-section regress-long-value-64k \
    regress-too-many-layers regress-huge-input regress-pad-growth regress-conv-weights \
    regress-fc-weights regress-del-in-key regress-escape-sequence; do
    expect "--model $f" --model "$CORPUS/net/$f" --data "$SYN"
  done
  for f in long-line many-keys many-layers over-limit; do
    expect "--model $f (generated)" --model "$big/net/$f" --data "$SYN"
  done
  for f in "$CORPUS"/safetensors/regress-*; do
    expect "--load $(basename "$f")" --model "$LENET" --data "$SYN" --load "$f"
  done
  expect "--load many-tensors (generated)" --model "$LENET" --data "$SYN" --load "$big/safetensors/many-tensors"

  # IDX files: magic 0x803 and dims, big-endian.
  be32() { printf "$(printf '\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; }
  # data NAME IMAGES_N H W LABELS_N: a directory with train-* files of
  # those dimensions and no data after the headers (so truncated, unless a
  # check before the data refuses them).
  data() {
    d="$WORK/data-$1"
    mkdir -p "$d"
    { be32 $((0x803)); be32 "$2"; be32 "$3"; be32 "$4"; } >"$d/train-images-idx3-ubyte"
    { be32 $((0x801)); be32 "$5"; } >"$d/train-labels-idx1-ubyte"
  }
  data dims-2p31 2147483648 1 1 2147483648
  expect "--data: 2^31 images" --model "$LENET" --data "$WORK/data-dims-2p31"
  data dims-overflow 4294967295 4294967295 4294967295 1
  expect "--data: dimensions whose product overflows" --model "$LENET" --data "$WORK/data-dims-overflow"
  data truncated 60000 28 28 60000
  gzip -c "$WORK/data-truncated/train-images-idx3-ubyte" | head -c 20 >"$WORK/data-truncated/train-images-idx3-ubyte.gz"
  expect "--data: truncated gzip" --model "$LENET" --data "$WORK/data-truncated"
  data gzbomb 1 1 1 1
  # A 2 MB gzip file that promises 1.5 GB (less than gzip's 1032:1 allows)
  # and holds 32 MB: read as it decompresses, then refused as truncated,
  # without a 1.5 GB buffer.
  { be32 $((0x803)); be32 1500000; be32 1000; be32 1; head -c 30000000 /dev/zero; head -c 2000000 /dev/urandom; } |
    gzip -1 -c >"$WORK/data-gzbomb/train-images-idx3-ubyte.gz"
  expect "--data: gzip promising 1.5 GB" --model "$LENET" --data "$WORK/data-gzbomb"
  # A named pipe nobody writes to: opening it would block for ever.
  data fifo 1 1 1 1
  rm -f "$WORK/data-fifo/train-images-idx3-ubyte"
  if mkfifo "$WORK/data-fifo/train-images-idx3-ubyte" 2>/dev/null; then
    expect "--data: a FIFO" --model "$LENET" --data "$WORK/data-fifo"
  fi
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
exit 0
