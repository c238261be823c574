# The input's slots in rotation (src/net/input.c): with two, the load of
# batch i runs before the backward pass of batch i - 1 has ended, which one
# slot forbids (the load waits for the first layer's weight gradient, the
# last reader of the one buffer); both train to the same bits and test to
# the same accuracy, with shuffling; --input-slots auto takes two for
# lenet's small input and one for a mesh model's, as large as its
# activations.
. "$TOP_SRCDIR/tests/common.sh"

# One rank, one worker, no priorities and the central FIFO queue (eager):
# the load ahead, submitted before the backward pass, runs before the
# backward tasks that become ready after it.
common="--model $MODELS/lenet.cfg --batch 32 --iters 8 --lr 0.05 --momentum 0.9 --shuffle on --seed 3 --test on
  --priorities off --sched eager --trace-iters 3:6"
for s in 1 2; do
  if run 1 1 $common --input-slots $s --trace "$WORK/t$s.json" --save "$WORK/c$s.st" >"$WORK/s$s.log" 2>&1; then
    ok "--input-slots $s runs"
  else
    fail "--input-slots $s: $(tail -3 "$WORK/s$s.log")"
  fi
done
grep -q "input in 1 slot\(;\|$\)" "$WORK/s1.log" && grep -q "input in 2 slots\(;\|$\)" "$WORK/s2.log" &&
  ok "the setup line names the slots" || fail "setup line: $(grep 'input in' "$WORK/s1.log" "$WORK/s2.log")"
cmp -s "$WORK/c1.st" "$WORK/c2.st" && ok "one and two slots train to the same bits" ||
  fail "checkpoints differ: cmp $WORK/c1.st $WORK/c2.st"
a1=$(grep '^starconv-train:' "$WORK/s1.log") a2=$(grep '^starconv-train:' "$WORK/s2.log")
[ -n "$a1" ] && [ "${a1#*test accuracy}" = "${a2#*test accuracy}" ] && ok "the same test accuracy:${a1#*images/s,}" ||
  fail "test accuracy: '$a1' against '$a2'"

# For each traced iteration i after the first: "I LOAD_START BWD_FILTER_END"
# with the load of batch i and the end of conv1's weight gradient of i - 1.
starts() {
  awk '/"ph":"X"/ {
    match($0, /"name":"[^"]*"/); n = substr($0, RSTART + 8, RLENGTH - 9)
    match($0, /"ts":[0-9.e+-]*/); ts = substr($0, RSTART + 5, RLENGTH - 5) + 0
    match($0, /"dur":[0-9.e+-]*/); d = substr($0, RSTART + 6, RLENGTH - 6) + 0
    match($0, /"iteration":[0-9]*/); it = substr($0, RSTART + 12, RLENGTH - 12) + 0
    if (n == "input.load" && !(it in load)) load[it] = ts
    if (n == "input.load" && ts < load[it]) load[it] = ts
    if (n == "conv1.bwd_filter") bwdf[it] = ts + d
  }
  END { for (i in load) if ((i - 1) in bwdf) print i, load[i], bwdf[i - 1] }' "$1" | sort -n
}
starts "$WORK/t2.json" >"$WORK/two"
starts "$WORK/t1.json" >"$WORK/one"
if [ "$(wc -l <"$WORK/two")" -eq 3 ] && awk '$2 >= $3 { bad = 1 } END { exit bad }' "$WORK/two"; then
  ok "two slots: each batch's load runs before the batch before it ends its backward pass"
else
  fail "two slots: the loads do not run ahead (iteration, load start, conv1.bwd_filter end of the one before):
$(cat "$WORK/two")"
fi
# the check above can fail: with one slot no load may start before the end
if [ "$(wc -l <"$WORK/one")" -eq 3 ] && awk '$2 < $3 { bad = 1 } END { exit bad }' "$WORK/one"; then
  ok "one slot: each load waits for the weight gradient of the batch before"
else
  fail "one slot: a load ran before the last reader of its buffer ended:
$(cat "$WORK/one")"
fi

# --input-slots auto: two where the second is small, one for mesh128's
# 18-channel input; a bad value is refused.
run 1 1 --model "$MODELS/lenet.cfg" --batch 32 --iters 1 --test off >"$WORK/auto.log" 2>&1 &&
  grep -q "input in 2 slots\(;\|$\)" "$WORK/auto.log" && ok "auto: lenet in 2 slots" ||
  fail "auto lenet: $(grep 'input in' "$WORK/auto.log") $(tail -2 "$WORK/auto.log")"
STARPU_NCPU=1 "$MPIRUN" 1 "$TRAIN" --model "$MODELS/mesh128.cfg" --data synthetic-mesh:128 --batch 2 --iters 1 \
  --test off >"$WORK/mesh.log" 2>&1 && grep -q "input in 1 slot\(;\|$\)" "$WORK/mesh.log" && ok "auto: mesh128 in 1 slot" ||
  fail "auto mesh128: $(grep 'input in' "$WORK/mesh.log") $(tail -2 "$WORK/mesh.log")"
STARPU_NCPU=1 "$TRAIN" --model "$MODELS/lenet.cfg" --input-slots 3 >"$WORK/bad.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "input-slots" "$WORK/bad.log" && ok "--input-slots 3 refused: $(cat "$WORK/bad.log")" ||
  fail "--input-slots 3: status $rc, $(cat "$WORK/bad.log")"
finish
