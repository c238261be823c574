# Spatial and hybrid parallelism compute what one rank computes (Dryden et
# al.): the gradients of the first iteration (the momentum after it) and the
# weights after 3 iterations agree with 1 rank (relative 1e-5) for grids
# h2, w2, h2w2, n2h2, with 2 workers per rank, and with a grid per layer
# (redistribution between them).  tests/models/spatial.cfg has kernels
# 1, 3, 5, 7, strides 1 and 2 (and one larger than its kernel), padding,
# odd sizes, max and average pooling, and a layer thinner than its halo.
. "$TOP_SRCDIR/tests/common.sh"

SPATIAL="$TOP_SRCDIR/tests/models/spatial.cfg"
MIXED="$TOP_SRCDIR/tests/models/mixed.cfg"
common="--batch 8 --lr 0.05 --momentum 0.9 --weight-decay 0.0005 --shuffle off --test off --seed 11"

# ref MODEL ITERS: the 1-rank result
ref() {
  run 1 1 --model "$1" $common --iters "$2" --save "$WORK/ref-$(basename "$1" .cfg)-$2.safetensors" >/dev/null ||
    fail "reference run of $1 ($2 iterations)"
}

# same NP NCPU MODEL ITERS WHAT ARGS...: a run against its reference
same() {
  np=$1 ncpu=$2 model=$3 iters=$4 what=$5
  shift 5
  out="$WORK/out.safetensors"
  rm -f "$out"
  if run "$np" "$ncpu" --model "$model" $common --iters "$iters" --save "$out" "$@" >"$WORK/log" 2>&1; then
    if "$COMPARE" "$out" "$WORK/ref-$(basename "$model" .cfg)-$iters.safetensors" 1e-5; then
      ok "$what matches 1 rank"
    else
      fail "$what differs from 1 rank"
    fi
  else
    fail "$what: the run failed"
    tail -3 "$WORK/log"
  fi
}

ref "$SPATIAL" 1
ref "$SPATIAL" 3
# the same layers without parallel= keys, on 1 rank
run 1 1 --model "$MODELS/lenet.cfg" $common --iters 3 --save "$WORK/ref-mixed-3.safetensors" >/dev/null ||
  fail "reference run of lenet.cfg"
run 1 1 --model "$SPATIAL" $common --iters 0 --save "$WORK/init.safetensors" >/dev/null || fail "init run"
# the comparison must be able to fail: training moved the weights
if "$COMPARE" "$WORK/ref-spatial-3.safetensors" "$WORK/init.safetensors" 1e-3 >/dev/null; then
  fail "weights did not change in 3 iterations"
else
  ok "weights changed from the initialization"
fi

same 2 1 "$SPATIAL" 1 "h2, gradients of iteration 1" --parallel h2
same 2 1 "$SPATIAL" 3 "h2, weights after 3 iterations" --parallel h2
same 2 1 "$SPATIAL" 3 "w2" --parallel w2
same 2 2 "$SPATIAL" 3 "w2 with 2 workers per rank" --parallel w2
same 4 1 "$SPATIAL" 1 "h2w2, gradients of iteration 1" --parallel h2w2
same 4 1 "$SPATIAL" 3 "h2w2" --parallel h2w2
same 4 1 "$SPATIAL" 3 "n2h2" --parallel n2h2
same 4 1 "$MIXED" 3 "a grid per layer (h2w2, n2h2, n2w2, n4)"

# batch normalization: with stats=sample (the default) the statistics span
# every block of the samples and every tile, so 2 workers, h2 and h2w2
# match 1 rank, and n2h2 matches n2 (statistics per sample group).  The
# conv biases just before BN have a gradient that is zero in exact
# arithmetic (BN removes the mean): rounding noise, held to an absolute
# tolerance instead.  stats=local (each rank's block) must change h2 and
# leave n2 alone.
BN="$TOP_SRCDIR/tests/models/bn.cfg"
bn_same() { # NP NCPU GRID REF WHAT [MODEL]
  out="$WORK/bn-$3-$2.safetensors"
  if run "$1" "$2" --model "${6:-$BN}" $common --iters 3 --parallel "$3" --save "$out" >"$WORK/log" 2>&1 &&
    "$COMPARE" "$out" "$4" 1e-5 0.bias=1e-4 4.bias=1e-4; then
    ok "batchnorm: $5"
  else
    fail "batchnorm: $5"
  fi
}
run 1 1 --model "$BN" $common --iters 3 --save "$WORK/bn-ref.safetensors" >/dev/null || fail "batchnorm reference"
bn_same 1 2 n1 "$WORK/bn-ref.safetensors" "2 workers match 1 worker"
bn_same 2 1 h2 "$WORK/bn-ref.safetensors" "h2 matches 1 rank"
bn_same 4 1 h2w2 "$WORK/bn-ref.safetensors" "h2w2 matches 1 rank"
run 2 1 --model "$BN" $common --iters 3 --parallel n2 --save "$WORK/bn-n2.safetensors" >/dev/null || fail "batchnorm n2"
bn_same 4 1 n2h2 "$WORK/bn-n2.safetensors" "n2h2 matches n2"
sed 's/^\[batchnorm\]$/[batchnorm]\nstats=local/' "$BN" >"$WORK/bn-local.cfg"
bn_same 2 1 n2 "$WORK/bn-n2.safetensors" "stats=local under n2 matches stats=sample" "$WORK/bn-local.cfg"
run 2 1 --model "$WORK/bn-local.cfg" $common --iters 3 --parallel h2 --save "$WORK/bn-local-h2.safetensors" >/dev/null ||
  fail "batchnorm stats=local h2"
if "$COMPARE" "$WORK/bn-local-h2.safetensors" "$WORK/bn-ref.safetensors" 1e-3 >/dev/null; then
  fail "batchnorm: stats=local under h2 gives the same weights as whole samples"
else
  ok "batchnorm: stats=local under h2 normalizes each block on its own (weights differ from 1 rank)"
fi

# the fully convolutional mesh model (conv-BN-ReLU blocks, per-pixel loss
# split too) on synthetic data: the gradients of the first iteration.  (Its
# weights after several iterations at batch 2 differ at 1e-3 even between
# 1 and 2 workers on one rank: BN over 2 samples x 4 pixels amplifies
# rounding; bn.cfg above checks 3 iterations.)  Every conv bias but the
# last feeds a BN: absolute tolerance for those.
mesh="--model $MODELS/mesh128.cfg --data synthetic-mesh:128 --batch 2 --lr 0.05 --momentum 0.9 --shuffle off --test off --iters 1"
zero_grads=""
i=0
while [ $i -le 51 ]; do zero_grads="$zero_grads $i.bias=1e-4"; i=$((i + 3)); done
run 1 1 $mesh --save "$WORK/ref-mesh.safetensors" >/dev/null || fail "mesh128 reference run"
if run 4 1 $mesh --parallel h2w2 --save "$WORK/mesh-h2w2.safetensors" >"$WORK/log" 2>&1 &&
  "$COMPARE" "$WORK/mesh-h2w2.safetensors" "$WORK/ref-mesh.safetensors" 1e-5 $zero_grads; then
  ok "mesh128 h2w2 (BN statistics and per-pixel loss split too): gradients match 1 rank"
else
  fail "mesh128 h2w2 differs from 1 rank (or failed)"
fi

# --report-memory / --mem-limit: splitting the samples spatially shrinks
# each rank's share; a limit between the two refuses 1 rank (exit 2, a
# message) and accepts h2w2 on 4
memtotal() { awk '$1 ~ /^[0-9]+$/ && NF == 5 { if ($5 > m) m = $5 } END { print m + 0 }' "$1"; }
run 1 1 $mesh --iters 0 --report-memory >"$WORK/mem1" 2>&1 || fail "--report-memory on 1 rank"
run 4 1 $mesh --iters 0 --report-memory --parallel h2w2 >"$WORK/mem4" 2>&1 || fail "--report-memory on 4 ranks"
m1=$(memtotal "$WORK/mem1") m4=$(memtotal "$WORK/mem4")
if [ "$m4" -gt 0 ] && [ "$m4" -lt "$m1" ]; then
  ok "memory per rank: $m1 bytes on 1 rank, at most $m4 with h2w2"
  limit=$(((m1 + m4) / 2))
  run 1 1 $mesh --iters 1 --mem-limit "$limit" >"$WORK/log" 2>&1
  st=$?
  if [ "$st" -eq 2 ] && grep -q "over --mem-limit" "$WORK/log"; then
    ok "1 rank refused under --mem-limit $limit"
  else
    fail "1 rank under --mem-limit $limit: exit $st"
  fi
  if run 4 1 $mesh --iters 1 --mem-limit "$limit" --parallel h2w2 >"$WORK/log" 2>&1; then
    ok "h2w2 on 4 ranks fits --mem-limit $limit"
  else
    fail "h2w2 on 4 ranks refused under --mem-limit $limit"
  fi
else
  fail "memory per rank: $m1 bytes on 1 rank, $m4 with h2w2"
fi

# refused clearly
expect_refused() {
  what=$1 msg=$2
  shift 2
  if run "$@" >"$WORK/log" 2>&1; then
    fail "$what was accepted"
  elif grep -q "$msg" "$WORK/log"; then
    ok "$what refused: $(grep -m1 "$msg" "$WORK/log")"
  else
    fail "$what: wrong message"
    cat "$WORK/log"
  fi
}
expect_refused "a grid of 4 ranks on 2" "has 4 ranks but 2 were started" 2 1 --model "$SPATIAL" $common --iters 1 --parallel h2w2
expect_refused "channels that do not split evenly" "conv1: its 4 output channels do not split evenly into 3 parts" 3 1 --model "$SPATIAL" $common --batch 6 --iters 1 --parallel c3
expect_refused "a layer smaller than its grid" "cannot be split over" 4 1 --model "$SPATIAL" $common --iters 1 --parallel h4
sed 's/^\[connected\]$/[connected]\nparallel=h2w2/' "$MIXED" >"$WORK/bad.cfg"
expect_refused "parallel= on a fully connected layer" "needs whole samples" 4 1 --model "$WORK/bad.cfg" $common --iters 1
finish
