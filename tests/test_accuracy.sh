# The quickstart settings reach at least 85% test accuracy after one epoch.
. "$TOP_SRCDIR/tests/common.sh"

out=$(run 2 1 --model "$MODELS/lenet.cfg" --epochs 1 --batch 64 --lr 0.05 --momentum 0.9 --metrics "$WORK/m.jsonl" 2>"$WORK/err")
echo "$out"
acc=$(echo "$out" | sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' | tail -n 1)
if [ -n "$acc" ] && awk "BEGIN { exit !($acc >= 85) }"; then
  ok "test accuracy $acc% >= 85%"
else
  fail "test accuracy '${acc:-none}' < 85%"
  tail -n 5 "$WORK/err"
fi
if grep -q '"test_accuracy"' "$WORK/m.jsonl" && grep -q '"images_per_s"' "$WORK/m.jsonl"; then
  ok "metrics file has loss, images/s and test accuracy"
else
  fail "metrics file incomplete"
fi

# The mesh model learns its synthetic per-pixel task: 3 epochs of mesh128
# (1000 samples) bring the test loss from about 0.69 (chance) below 0.5
# and the per-pixel accuracy to 75% or more.
out=$(run 1 2 --model "$MODELS/mesh128.cfg" --data synthetic-mesh:128 --epochs 3 --batch 8 --lr 0.002 2>&1)
echo "$out" | grep "test accuracy"
last=$(echo "$out" | grep "^epoch 3: test accuracy")
acc=$(echo "$last" | sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p')
tl=$(echo "$last" | sed -n 's/.*test loss \([0-9.]*\).*/\1/p')
if [ -n "$acc" ] && [ -n "$tl" ] && awk "BEGIN { exit !($acc >= 75 && $tl < 0.5) }"; then
  ok "mesh128 learns: test accuracy $acc%, test loss $tl after 3 epochs"
else
  fail "mesh128: test accuracy '${acc:-none}'%, test loss '${tl:-none}' after 3 epochs (want >= 75%, < 0.5)"
fi
finish
