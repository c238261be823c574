# The quickstart settings reach at least 85% test accuracy after one epoch.
. "$TOP_SRCDIR/tests/common.sh"

out=$(run 2 1 --model "$MODELS/lenet.cfg" --epochs 1 --batch 64 --lr 0.05 --momentum 0.9 --metrics "$WORK/m.jsonl" 2>/dev/null)
echo "$out"
acc=$(echo "$out" | sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' | tail -n 1)
if [ -n "$acc" ] && awk "BEGIN { exit !($acc >= 85) }"; then
  ok "test accuracy $acc% >= 85%"
else
  fail "test accuracy '${acc:-none}' < 85%"
fi
if grep -q '"test_accuracy"' "$WORK/m.jsonl" && grep -q '"images_per_s"' "$WORK/m.jsonl"; then
  ok "metrics file has loss, images/s and test accuracy"
else
  fail "metrics file incomplete"
fi
finish
