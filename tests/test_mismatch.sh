# Ranks started with different models, options, data, checkpoints or worker
# counts stop at start-up with one line naming the difference and exit
# status 2, instead of waiting forever for each other's transfers.
. "$TOP_SRCDIR/tests/common.sh"

base="--data $DATA --model $MODELS/lenet.cfg --iters 2 --batch 32 --test off"
"$MPIRUN" 1 "$TRAIN" $base --iters 1 --save "$WORK/a.st" >/dev/null 2>&1 || fail "save a checkpoint"
"$MPIRUN" 1 "$TRAIN" $base --iters 2 --save "$WORK/b.st" >/dev/null 2>&1 || fail "save another checkpoint"

# expect WHAT PATTERN ARGS-OF-RANK-1...: rank 0 runs $base, rank 1 its own.
expect() {
  what=$1 pattern=$2
  shift 2
  start=$(date +%s)
  STARPU_NCPU=1 SC_TEST_TIMEOUT=120 "$MPIRUN" 1 "$TRAIN" $base "$@" : -np 1 "$TRAIN" $base $rank1 \
    >"$WORK/out" 2>"$WORK/err"
  rc=$?
  secs=$(($(date +%s) - start))
  line=$(grep '^starconv-train:' "$WORK/err" | head -1)
  if [ $rc -eq 2 ] && echo "$line" | grep -q "ranks 0 and 1 were started with different $pattern"; then
    ok "$what: exit 2 after ${secs}s: $line"
  else
    cat "$WORK/err" | head -5
    fail "$what: exit $rc, '$line'"
  fi
}

rank1="--batch 16"
expect "another --batch" "options"
rank1="--model $MODELS/wide.cfg"
expect "another model" "models"
rank1="--data synthetic:1x28x28:10"
expect "another data set" "training or test data"
rank1="--load $WORK/b.st"
expect "another checkpoint" "checkpoints" --load "$WORK/a.st"
rank1=
STARPU_NCPU=1 SC_TEST_TIMEOUT=120 "$MPIRUN" 1 "$TRAIN" $base : -np 1 env STARPU_NCPU=2 "$TRAIN" $base \
  >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "different numbers of CPU workers" "$WORK/err"; then
  ok "other STARPU_NCPU: exit 2"
else
  fail "other STARPU_NCPU: exit $rc"
fi

# The same command on both: it trains.
if STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $base >/dev/null 2>&1; then
  ok "the same command on 2 ranks trains"
else
  fail "the same command on 2 ranks"
fi
finish
