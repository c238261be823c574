# Channel and filter parallelism (Dryden et al., SC'19) compute what one
# rank computes: the gradients of the first iteration (the momentum after
# it) and the weights after 3 iterations agree with 1 rank (relative 1e-5)
# under stationary-x (c2, c4), stationary-y (f2, f4), stationary-w (c2f2)
# and the hybrids n2c2, h2c2, n2f2, with 2 workers per rank, and for a
# model that mixes spatial, channel and filter layers (BN, a residual
# block) with redistribution between them; checkpoints and resume.  Then
# the bytes each rank sends for the gradient reduction: a 2-way channel
# split halves them.
. "$TOP_SRCDIR/tests/common.sh"

WIDE="$TOP_SRCDIR/tests/models/wide_small.cfg"
MIXED="$TOP_SRCDIR/tests/models/channels.cfg"
common="--batch 8 --lr 0.05 --momentum 0.9 --weight-decay 0.0005 --shuffle off --test off --seed 11"

run 1 1 --model "$WIDE" $common --iters 1 --save "$WORK/ref-1.safetensors" >/dev/null || fail "reference run (1 iteration)"
run 1 1 --model "$WIDE" $common --iters 3 --save "$WORK/ref-3.safetensors" >/dev/null || fail "reference run (3 iterations)"
run 1 1 --model "$WIDE" $common --iters 0 --save "$WORK/init.safetensors" >/dev/null || fail "init run"
# the comparison must be able to fail: training moved the weights
if "$COMPARE" "$WORK/ref-3.safetensors" "$WORK/init.safetensors" 1e-3 >/dev/null; then
  fail "weights did not change in 3 iterations"
else
  ok "weights changed from the initialization"
fi

# same NP NCPU ITERS WHAT ARGS...
same() {
  np=$1 ncpu=$2 iters=$3 what=$4
  shift 4
  out="$WORK/out.safetensors"
  rm -f "$out"
  if run "$np" "$ncpu" --model "$WIDE" $common --iters "$iters" --save "$out" "$@" >"$WORK/log" 2>&1; then
    if "$COMPARE" "$out" "$WORK/ref-$iters.safetensors" 1e-5; then
      ok "$what matches 1 rank"
    else
      fail "$what differs from 1 rank"
    fi
  else
    fail "$what: the run failed"
    tail -3 "$WORK/log"
  fi
}

same 2 1 1 "c2 (stationary-x), gradients of iteration 1" --parallel c2
same 2 1 3 "c2, weights after 3 iterations" --parallel c2
same 2 1 1 "f2 (stationary-y), gradients of iteration 1" --parallel f2
same 2 1 3 "f2" --parallel f2
same 2 2 3 "c2 with 2 workers per rank" --parallel c2
same 4 1 3 "c4" --parallel c4
same 4 1 3 "f4" --parallel f4
same 4 1 1 "c2f2 (stationary-w), gradients of iteration 1" --parallel c2f2
same 4 1 3 "c2f2" --parallel c2f2
same 4 1 3 "n2c2" --parallel n2c2
same 4 1 3 "n2f2" --parallel n2f2
same 4 1 3 "h2c2" --parallel h2c2

# bias=0: no share of a convolution has a bias (where it has one, only the
# shares of the first input channels hold it).
sed 's/^size=3$/size=3\nbias=0/' "$WIDE" >"$WORK/wide-nobias.cfg"
run 1 1 --model "$WORK/wide-nobias.cfg" $common --iters 3 --save "$WORK/nb-ref.safetensors" >/dev/null ||
  fail "bias=0: reference run"
for case in 4:c2f2 2:f2; do
  np=${case%%:*} grid=${case#*:}
  if run $np 1 --model "$WORK/wide-nobias.cfg" $common --iters 3 --parallel $grid --save "$WORK/nb.safetensors" \
    >"$WORK/log" 2>&1 && "$COMPARE" "$WORK/nb.safetensors" "$WORK/nb-ref.safetensors" 1e-5 &&
    [ "$("$COMPARE" --show "$WORK/nb.safetensors" | grep -c '^[0-9]*\.bias ')" = 1 ]; then
    ok "bias=0 under $grid matches 1 rank, and only fc has a bias"
  else
    fail "bias=0 under $grid"
    tail -3 "$WORK/log"
  fi
done

# Checkpoints hold whole tensors, gathered from the shares: c2f2 for 2
# iterations, then resumed for the third, gives the bits of 3 at once.
run 4 1 --model "$WIDE" $common --iters 3 --parallel c2f2 --save "$WORK/c2f2-3.safetensors" >/dev/null 2>&1 &&
  run 4 1 --model "$WIDE" $common --iters 2 --parallel c2f2 --save "$WORK/c2f2-2.safetensors" >/dev/null 2>&1 &&
  run 4 1 --model "$WIDE" $common --iters 3 --parallel c2f2 --resume "$WORK/c2f2-2.safetensors" \
    --save "$WORK/c2f2-r.safetensors" >/dev/null 2>&1 || fail "c2f2 checkpoint runs"
if "$COMPARE" "$WORK/c2f2-r.safetensors" "$WORK/c2f2-3.safetensors" 0 &&
  ! "$COMPARE" "$WORK/c2f2-2.safetensors" "$WORK/c2f2-3.safetensors" 1e-4 >/dev/null; then
  ok "c2f2: 2 iterations, a checkpoint and a resumed third give the bits of 3 iterations"
else
  fail "c2f2: the resumed run differs"
fi

# The mixed model against the same layers without parallel= on 1 rank.
# The conv biases just before BN have a gradient that is zero in exact
# arithmetic: rounding noise, held to an absolute tolerance (as in
# test_spatial.sh).
sed '/^parallel=/d' "$MIXED" >"$WORK/mixed-ref.cfg"
run 1 1 --model "$WORK/mixed-ref.cfg" $common --iters 3 --save "$WORK/mixed-ref.safetensors" >/dev/null ||
  fail "reference run of the mixed model"
if run 4 1 --model "$MIXED" $common --iters 3 --save "$WORK/mixed.safetensors" >"$WORK/log" 2>&1 &&
  "$COMPARE" "$WORK/mixed.safetensors" "$WORK/mixed-ref.safetensors" 1e-5 0.bias=1e-4 3.bias=1e-4 6.bias=1e-4; then
  ok "h2w2, c2f2, c4 with BN and a residual block, f4, h2c2, n2c2, n2f2 layers in one model match 1 rank"
else
  fail "the mixed model differs from 1 rank"
  tail -3 "$WORK/log"
fi

# Gradient bytes.  A ring allreduce over G ranks sends 2 (G - 1) / G of
# the vector from each rank, and 2 (G - 1) vectors from all of them: n2
# sends W floats per rank, n4 1.5 W.  WF = 330 of the W parameters are in
# the fully connected layer, which stays sample parallel; the others are
# convolutions.  Under n2c2 each convolution weight is held by the 2 ranks
# of its N group only, each rank holding half of them (plus its biases), so
# that all ranks together send 2 (W - WF) + 6 WF floats, and each about
# (W - WF) / 2 + 1.5 WF: about half of what n2 sends per rank.  All through
# the ring (--comm-direct 0), whose bytes are its own count.
WF=330
run 1 1 --model "$WIDE" $common --iters 1 >"$WORK/log" 2>&1
W=$(grep -o '[0-9]* parameters' "$WORK/log" | head -1 | cut -d' ' -f1)
bytes() { # NP GRID: the per-rank bytes, one line each
  run "$1" 1 --model "$WIDE" $common --iters 2 --parallel "$2" --report-comm --comm-direct 0 >"$WORK/comm" 2>&1 ||
    { fail "--report-comm run $2"; return; }
  awk '/^gradient reduction/ {on = 1; next} on && $1 ~ /^[0-9]+$/ {print $2}' "$WORK/comm"
}
n2=$(bytes 2 n2)
n4=$(bytes 4 n4)
n2c2=$(bytes 4 n2c2)
sum() { awk '{s += $1} END {print s + 0}'; }
echo "W = $W floats; bytes per rank: n2 [$(echo $n2)], n4 [$(echo $n4)], n2c2 [$(echo $n2c2)]"
if [ "$(echo "$n2" | sum)" = $((2 * 4 * W)) ] && [ "$(echo "$n4" | sum)" = $((6 * 4 * W)) ] &&
  [ "$(echo "$n2c2" | sum)" = $((2 * 4 * (W - WF) + 6 * 4 * WF)) ] && [ "$(echo "$n2c2" | wc -l)" = 4 ]; then
  ok "gradient bytes: n2 sends 2W floats in all, n4 6W, n2c2 2(W - WF) + 6WF"
else
  fail "gradient bytes differ from the ring's count"
fi
# per rank: n2c2's largest is at most 0.55 of n2's (the biases are on half
# the ranks, and the fully connected layer is not split)
if awk -v a="$(echo "$n2c2" | sort -n | tail -1)" -v b="$(echo "$n2" | head -1)" 'BEGIN {exit !(a > 0 && a <= 0.55 * b)}'; then
  ok "a 2-way channel split halves each rank's gradient bytes (n2c2 against n2)"
else
  fail "n2c2 does not halve each rank's gradient bytes"
fi

finish
