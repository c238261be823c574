# A NaN or Inf stops training (exit 3) with the iteration and the first
# place it appeared, and the last checkpoint written before it stays;
# --nonfinite skip goes on without applying such gradients.
. "$TOP_SRCDIR/tests/common.sh"

nan="--model $MODELS/lenet.cfg --batch 16 --shuffle off --test off --data synthetic:1x28x28:10:nan=37"

# finite FILE: every tensor compares equal to itself (a NaN never does).
finite() { "$COMPARE" "$1" "$1" 0 >/dev/null; }
iteration() { "$COMPARE" --show "$1" | sed -n 's/^optimizer.iteration I64 \[\] = //p'; }

# 1. Sample 37 (global batch 3 of 16, file order) has a NaN.
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan --iters 10 --log-every 4 --save-every 2 --save "$WORK/a.st" \
  >"$WORK/out" 2>"$WORK/err"
rc=$?
line=$(grep '^starconv-train:' "$WORK/err")
if [ $rc -eq 3 ] && echo "$line" | grep -q "iteration 3: a NaN or Inf, first in the input samples" &&
  echo "$line" | grep -q "keeps the checkpoint of iteration 2" && [ "$(iteration "$WORK/a.st")" = 2 ]; then
  ok "corrupt sample: exit 3: $line"
else
  fail "corrupt sample: exit $rc: $line"
fi
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan --iters 2 --save "$WORK/two.st" >/dev/null 2>&1
if "$COMPARE" "$WORK/a.st" "$WORK/two.st" 0 >/dev/null; then
  ok "the checkpoint kept is the one of iteration 2, bit for bit"
else
  fail "the checkpoint kept differs from a 2-iteration run"
fi

# 2. A learning rate that blows the weights up: the loss goes NaN.
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" --data "$DATA" --model "$MODELS/lenet.cfg" --batch 32 --lr 1e8 --iters 40 \
  --log-every 5 --test off --save-every 2 --save "$WORK/d.st" >"$WORK/out" 2>"$WORK/err"
rc=$?
line=$(grep '^starconv-train:' "$WORK/err")
bad=$(echo "$line" | sed -n 's/^starconv-train: iteration \([0-9]*\): a NaN or Inf, first in .* layer .*/\1/p')
kept=$(iteration "$WORK/d.st")
if [ $rc -eq 3 ] && [ -n "$bad" ] && [ -n "$kept" ] && [ "$kept" -lt "$bad" ] && finite "$WORK/d.st"; then
  ok "divergence (--lr 1e8): exit 3, checkpoint of iteration $kept is finite: $line"
else
  fail "divergence: exit $rc, kept iteration '$kept': $line"
fi

# 3. --nonfinite skip: training goes on, and says how many were skipped.
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan --iters 6 --nonfinite skip --save "$WORK/s.st" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "6 iterations.*, 1 batches skipped (not finite)" "$WORK/out" && finite "$WORK/s.st" &&
  [ "$(iteration "$WORK/s.st")" = 6 ]; then
  ok "--nonfinite skip: $(cat "$WORK/out")"
else
  cat "$WORK/err"
  fail "--nonfinite skip: exit $rc"
fi
# 4. A skipped batch changes nothing on any rank, replicated layers
#    included, nor batch normalization's running statistics: 3 iterations
#    whose third batch is bad end where 2 end.  (The partial case, where
#    only some layers' gradients are not finite, is test_collectives' gate
#    test.)
for variant in "--fc-replicate 0" "--fc-replicate 1" "--model $TOP_SRCDIR/tests/models/bn.cfg"; do
  # shellcheck disable=SC2086 # $variant is two words
  STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan $variant --iters 3 --nonfinite skip --save "$WORK/s3.st" \
    >"$WORK/out" 2>"$WORK/err"
  rc=$?
  # shellcheck disable=SC2086
  STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan $variant --iters 2 --save "$WORK/s2.st" >/dev/null 2>&1
  # The iteration counters count the skipped batch (as PyTorch's
  # num_batches_tracked does under GradScaler); everything else must not.
  ignore=$("$COMPARE" --show "$WORK/s2.st" | awk '$1 ~ /num_batches_tracked$|^optimizer.iteration$/ { print "ignore=" $1 }')
  # shellcheck disable=SC2086 # one word per ignored tensor
  if [ $rc -eq 0 ] && grep -q "1 batches skipped" "$WORK/out" && "$COMPARE" "$WORK/s3.st" "$WORK/s2.st" 0 \
    $ignore >/dev/null
  then
    ok "--nonfinite skip ${variant##*/}: the skipped batch 3 left the checkpoint bit-equal to 2 iterations"
  else
    cat "$WORK/err"
    # shellcheck disable=SC2086
    "$COMPARE" "$WORK/s3.st" "$WORK/s2.st" 0 $ignore | grep FAIL
    fail "--nonfinite skip ${variant##*/}: exit $rc, or the checkpoint after the skipped batch differs"
  fi
done
finish
