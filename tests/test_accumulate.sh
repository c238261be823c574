# --accumulate K: an iteration of K micro-batches of B is one optimizer
# step on K x B samples.  (a) On 1 rank (1 and 2 workers), --batch 8
# --accumulate 4 trains the weights --batch 32 trains, from the same
# samples in the same order (shuffled), within 1e-6 relative (the sums'
# order differs; momentum 1e-5), and logs the same loss (the mean over
# the 4 micro-batches, not the last one's); (b) the same on 2 ranks under
# sample parallelism, a spatial split (h2), a channel split (c2, under
# --grad-comm end) and --fc-replicate 1; (c) the
# gradient reduction runs once an iteration: --report-comm's bytes per
# iteration at --batch 16 --accumulate 4 equal those at --batch 16, a
# quarter per sample; (d) a run stopped after 3 iterations and resumed
# ends on the bytes of an uninterrupted one, and a resume with another K
# is refused; (e) PyTorch's gradient accumulation (backward() on each
# micro-batch's loss / K, one SGD step) from the same initial checkpoint
# gives the same weights and momentum within 1e-5 relative, lenet on 2
# ranks and the residual network with batch normalization (statistics
# per micro-batch, running ones updated by each, num_batches_tracked K an
# iteration) on 1 (skipped without Debian's python3-torch); (f) a NaN in
# the second micro-batch of iteration 3: --nonfinite stop names the
# iteration and the input, --nonfinite skip skips the whole iteration (3
# iterations end where 2 end, bit for bit; --fc-replicate 1 too).
. "$TOP_SRCDIR/tests/common.sh"

LENET="--model $MODELS/lenet.cfg --test off --seed 7 --lr 0.05 --momentum 0.9 --weight-decay 0.001"
SAME="ignore=optimizer.global_batch ignore=optimizer.accumulate momentum=1e-5"

# loss_of METRICS ITERATION: that iteration's logged loss.
loss_of() { sed -n "s/^{\"iteration\": $2, .*\"loss\": \([0-9.]*\),.*/\1/p" "$1"; }

# same NAME NP NCPU ARGS...: --batch 8 x NP --accumulate 4 against --batch
# 32 x NP, 5 iterations, weights and logged losses.
same() {
  s_name=$1 s_np=$2 s_ncpu=$3
  shift 3
  run "$s_np" "$s_ncpu" $LENET --iters 5 --log-every 1 --batch $((8 * s_np)) --accumulate 4 "$@" \
    --metrics "$WORK/k4.json" --save "$WORK/k4.st" >"$WORK/k4.log" 2>&1 ||
    { fail "$s_name: --accumulate 4 run"; cat "$WORK/k4.log"; return; }
  run "$s_np" "$s_ncpu" $LENET --iters 5 --log-every 1 --batch $((32 * s_np)) "$@" \
    --metrics "$WORK/k1.json" --save "$WORK/k1.st" >"$WORK/k1.log" 2>&1 ||
    { fail "$s_name: --batch $((32 * s_np)) run"; return; }
  l4=$(loss_of "$WORK/k4.json" 5) l1=$(loss_of "$WORK/k1.json" 5)
  if "$COMPARE" "$WORK/k4.st" "$WORK/k1.st" 1e-6 $SAME >"$WORK/cmp" 2>&1 && [ -n "$l4" ] && [ -n "$l1" ] &&
    awk -v a="$l4" -v b="$l1" 'BEGIN { d = a - b; exit !(d <= 1e-5 && d >= -1e-5) }'; then
    ok "$s_name: --batch $((8 * s_np)) --accumulate 4 = --batch $((32 * s_np)) ($(tail -1 "$WORK/cmp"); loss $l4 = $l1)"
  else
    fail "$s_name: --accumulate 4 differs from the 4 times larger batch (loss $l4 against $l1)"
    cat "$WORK/cmp"
  fi
}

# (a), (b)
same "1 rank" 1 1
same "1 rank, 2 workers" 1 2
same "2 ranks" 2 1
same "2 ranks, h2" 2 1 --parallel h2
same "2 ranks, c2, --grad-comm end" 2 1 --parallel c2 --grad-comm end
same "2 ranks, --fc-replicate 1" 2 1 --fc-replicate 1

# (c) the ring's bytes (no direct collectives), per iteration and sample
bytes() { awk '/^gradient reduction/ {on = 1; next} on && $1 == 0 {print $2}' "$1"; }
run 2 1 $LENET --iters 4 --batch 16 --accumulate 4 --report-comm --comm-direct 0 >"$WORK/c4" 2>&1 ||
  fail "--report-comm, --accumulate 4"
run 2 1 $LENET --iters 4 --batch 16 --report-comm --comm-direct 0 >"$WORK/c1" 2>&1 || fail "--report-comm, K 1"
b4=$(bytes "$WORK/c4") b1=$(bytes "$WORK/c1")
if [ -n "$b4" ] && [ "${b4%.*}" -gt 0 ] && [ "$b4" = "$b1" ]; then
  ok "one gradient reduction an iteration: $b4 bytes per iteration at --accumulate 4 and 1, $((b4 / 64)) against" \
    "$((b1 / 16)) per sample"
else
  fail "gradient bytes per iteration: $b4 at --accumulate 4, $b1 at 1 (want equal and > 0)"
fi

# (d) resume mid-run, shuffled: the same bytes
K4="$LENET --batch 8 --accumulate 4"
run 1 1 $K4 --iters 6 --save "$WORK/whole.st" >/dev/null 2>&1 || fail "6 iterations"
run 1 1 $K4 --iters 3 --save "$WORK/half.st" >/dev/null 2>&1 || fail "3 iterations"
run 1 1 $K4 --iters 6 --resume "$WORK/half.st" --save "$WORK/resumed.st" >"$WORK/resume.log" 2>&1 ||
  fail "resumed to 6 iterations"
if cmp -s "$WORK/whole.st" "$WORK/resumed.st"; then
  ok "--accumulate 4 resumed after iteration 3 of 6: the uninterrupted run's checkpoint, byte for byte"
else
  fail "--accumulate 4: the resumed run differs from the uninterrupted one"
  "$COMPARE" "$WORK/resumed.st" "$WORK/whole.st" 0
fi
run 1 1 $LENET --batch 8 --iters 6 --resume "$WORK/half.st" >"$WORK/other" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q 'saved with --accumulate 4, this run has --accumulate 1' "$WORK/other"; then
  ok "a resume with another --accumulate is refused (status 2)"
else
  fail "a resume with another --accumulate: status $rc (want 2)"
  cat "$WORK/other"
fi

# (e) PyTorch's replay
PY=/usr/bin/python3
if [ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  SGD="--test off --seed 3 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --shuffle off"
  TORCH="--model $MODELS/lenet.cfg $SGD"
  run 1 1 $TORCH --batch 8 --accumulate 4 --iters 0 --save "$WORK/init.st" >/dev/null 2>&1 || fail "torch: init"
  run 2 1 $TORCH --batch 8 --accumulate 4 --iters 4 --save "$WORK/final.st" >/dev/null 2>&1 || fail "torch: 4 steps"
  if "$PY" "$TOP_SRCDIR/bench/torch_check.py" --model "$MODELS/lenet.cfg" --init "$WORK/init.st" \
    --final "$WORK/final.st" --iters 4 --batch 8 --accumulate 4 --lr 0.02 --momentum 0.9 --weight-decay 0.001 \
    --tol 1e-5 --check-momentum --data "$DATA" >"$WORK/torch" 2>&1; then
    ok "PyTorch's gradient accumulation, 4 steps of 4 x 8 on 2 ranks: $(grep '^max relative' "$WORK/torch")"
  else
    fail "PyTorch's gradient accumulation differs"
    cat "$WORK/torch"
  fi
  RES="--model $TOP_SRCDIR/tests/models/residual.cfg $SGD"
  run 1 1 $RES --batch 8 --accumulate 4 --iters 0 --save "$WORK/rinit.st" >/dev/null 2>&1 || fail "residual: init"
  run 1 1 $RES --batch 8 --accumulate 4 --iters 2 --save "$WORK/rfinal.st" >/dev/null 2>&1 || fail "residual: 2 steps"
  if "$PY" "$TOP_SRCDIR/bench/torch_check.py" --model "$TOP_SRCDIR/tests/models/residual.cfg" --init "$WORK/rinit.st" \
    --final "$WORK/rfinal.st" --iters 2 --batch 8 --accumulate 4 --lr 0.02 --momentum 0.9 --weight-decay 0.001 \
    --tol 1e-5 --data "$DATA" >"$WORK/torch" 2>&1 && grep -q 'num_batches_tracked *scalar *8, torch 8$' "$WORK/torch"; then
    ok "PyTorch's gradient accumulation, residual.cfg (BN), 2 steps of 4 x 8: $(grep '^max relative' "$WORK/torch")"
  else
    fail "PyTorch's gradient accumulation on residual.cfg differs"
    cat "$WORK/torch"
  fi
else
  echo "# $PY cannot import torch: the PyTorch replay is not run"
fi

# (f) sample 37 of 16 an iteration (file order): iteration 3, micro-batch 2
nan="--model $MODELS/lenet.cfg --batch 4 --accumulate 4 --shuffle off --test off --data synthetic:1x28x28:10:nan=37"
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan --iters 6 >/dev/null 2>"$WORK/err"
rc=$?
line=$(grep '^starconv-train:' "$WORK/err")
if [ $rc -eq 3 ] && echo "$line" | grep -q "iteration 3: a NaN or Inf, first in the input samples"; then
  ok "a NaN in a micro-batch, --nonfinite stop: $line"
else
  fail "a NaN in a micro-batch, --nonfinite stop: status $rc (want 3): $line"
fi
for variant in "--fc-replicate 0" "--fc-replicate 1"; do
  # shellcheck disable=SC2086 # $variant is two words
  STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan $variant --iters 3 --nonfinite skip --save "$WORK/s3.st" >"$WORK/out" 2>&1
  rc=$?
  # shellcheck disable=SC2086
  STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan $variant --iters 2 --save "$WORK/s2.st" >/dev/null 2>&1
  if [ $rc -eq 0 ] && grep -q "3 iterations.*, 1 batches skipped" "$WORK/out" &&
    "$COMPARE" "$WORK/s3.st" "$WORK/s2.st" 0 ignore=optimizer.iteration >/dev/null; then
    ok "a NaN in a micro-batch, --nonfinite skip $variant: the whole iteration skipped, weights of iteration 2"
  else
    fail "a NaN in a micro-batch, --nonfinite skip $variant: status $rc, or the weights moved"
  fi
done

finish
