# Data parallelism computes what one rank computes: with --shuffle off, the
# weights and momentum after 5 iterations agree (relative 1e-5) for 1, 2 and 4
# ranks and for 1 vs 2 workers per rank.
. "$TOP_SRCDIR/tests/common.sh"

common="--model $MODELS/lenet.cfg --batch 16 --lr 0.05 --momentum 0.9 --weight-decay 0.0005 --shuffle off --test off --seed 7"
run 1 1 $common --iters 0 --save "$WORK/init.safetensors" >/dev/null || fail "init run"
run 1 1 $common --iters 5 --save "$WORK/ref.safetensors" >/dev/null || fail "reference run (1 rank, 1 worker)"

# The check must be able to fail: training moved the weights.
if "$COMPARE" "$WORK/ref.safetensors" "$WORK/init.safetensors" 1e-3 >/dev/null; then
  fail "weights did not change in 5 iterations"
else
  ok "weights changed from the initialization"
fi

for cfg in "2 1" "4 1" "1 2" "2 2"; do
  set -- $cfg
  out="$WORK/np$1-ncpu$2.safetensors"
  if run "$1" "$2" $common --iters 5 --save "$out" >/dev/null; then
    if "$COMPARE" "$out" "$WORK/ref.safetensors" 1e-5; then
      ok "$1 ranks x $2 workers match 1 rank x 1 worker"
    else
      fail "$1 ranks x $2 workers differ from 1 rank x 1 worker"
    fi
  else
    fail "run on $1 ranks x $2 workers"
  fi
done
finish
