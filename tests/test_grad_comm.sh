# Every gradient-communication policy and --fc-replicate give the weights
# and momentum of one rank (relative 1e-5) after 5 iterations, on 2 ranks
# (and a few mixes on 3 and 4 ranks and 2 workers per rank).
. "$TOP_SRCDIR/tests/common.sh"

common="--model $MODELS/lenet.cfg --batch 24 --lr 0.05 --momentum 0.9 --weight-decay 0.0005 --shuffle off --test off --seed 3 --iters 5"
run 1 1 $common --save "$WORK/ref.safetensors" >/dev/null || fail "reference run (1 rank)"

check() { # NP NCPU ARGS...
  np=$1 ncpu=$2
  shift 2
  out="$WORK/case.safetensors"
  rm -f "$out"
  if ! log=$(run "$np" "$ncpu" $common --save "$out" "$@" 2>&1); then
    fail "$np ranks x $ncpu workers $*: the run failed"
    echo "$log" | tail -5
  elif "$COMPARE" "$out" "$WORK/ref.safetensors" 1e-5 >/dev/null; then
    ok "$np ranks x $ncpu workers $* matches 1 rank"
  else
    fail "$np ranks x $ncpu workers $* differs from 1 rank"
    "$COMPARE" "$out" "$WORK/ref.safetensors" 1e-5 | tail -3
  fi
}

for g in layer end chunks:1 chunks:2 chunks:9 bucket:0.01 bucket:0.5 bucket:25; do
  check 2 1 --grad-comm "$g"
done
check 2 1 --fc-replicate 1
check 2 1 --fc-replicate 2 --grad-comm end
check 2 2 --fc-replicate 1 --grad-comm chunks:2
check 3 1 --fc-replicate 2 --grad-comm bucket:0.1
check 4 1 --fc-replicate 1 --grad-comm end --priorities off

# The policies must really differ: the log names the number of collectives.
# lenet: fc2 5 KB, fc1 1.6 MB, conv2 74 KB, conv1 1.3 KB of gradients.
for case in "layer:4 collectives" "end:1 collective " "chunks:2:2 collectives" "bucket:0.01:3 collectives" \
    "bucket:0.001:4 collectives"; do
  g=${case%:*} want=${case##*:}
  if SC_LOG_LEVEL=1 run 2 1 $common --iters 1 --grad-comm "$g" 2>&1 | grep -q "($want"; then
    ok "--grad-comm $g makes $want"
  else
    fail "--grad-comm $g does not make $want"
  fi
done
finish
