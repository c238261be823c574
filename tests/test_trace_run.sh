# A real 2-rank run with --trace and --report: the trace is valid JSON (our
# strict reader, and Python's when there is one) with a lane per worker of
# each rank and communication lanes, events named layer.phase, and the
# report has communication > 0 and 0 <= overlap ratio <= 1 on every rank.
# (conv1's gradient, 1.3 KB, is one direct collective, a comm event of its
# own; fc1's goes through the ring: transfers and reduce_scatter tasks.)
. "$TOP_SRCDIR/tests/common.sh"
REPORT="$TOP_BUILDDIR/starconv-report"

trace="$WORK/trace.json"
if run 2 2 --model "$MODELS/lenet.cfg" --batch 32 --iters 8 --test off --trace-iters 3:6 --trace "$trace" \
    --report >"$WORK/out" 2>"$WORK/err"; then
  ok "2-rank run with --trace --report"
else
  fail "2-rank run with --trace --report"
  tail -5 "$WORK/err"
fi

if [ -x /usr/bin/python3 ]; then
  if /usr/bin/python3 -m json.tool "$trace" >/dev/null; then ok "python reads the trace"; else fail "python rejects the trace"; fi
fi
if "$REPORT" "$trace" >"$WORK/report" 2>&1; then ok "starconv-report reads the trace"; else fail "starconv-report rejects the trace"; fi
grep -q "iterations 3\.\.6" "$WORK/report" || fail "the traced range is not 3..6"

for lane in '"rank 0"' '"rank 1"' '"cpu 0"' '"cpu 1"' '"comm"'; do
  if grep -q "\"args\": *{\"name\": *$lane}" "$trace"; then ok "lane $lane"; else fail "no lane $lane"; fi
done
for name in input.load conv1.fwd conv2.fwd fc2.fwd loss1.fwd conv2.bwd_data conv2.bwd_filter fc1.bwd_weights \
    conv1.grad_allreduce conv2.grad_allreduce fc1.grad_allreduce fc1.reduce_scatter conv1.sgd; do
  if grep -q "\"name\": *\"$name\"" "$trace"; then ok "event $name"; else fail "no event $name"; fi
done
# Every traced iteration is there, and nothing else.
for it in 3 4 5 6; do
  grep -q "\"iteration\": *$it[,}]" "$trace" || fail "no event of iteration $it"
done
if grep -q "\"iteration\": *\(1\|2\|7\|8\)[,}]" "$trace"; then fail "events outside 3..6"; else ok "only iterations 3..6"; fi

# lenet's FLOPs per iteration of batch 32, 2 per multiply-add: conv1
# 28*28*32*9 forward and filter (no backward data: it reads the input),
# conv2 14*14*64*32*9, fc1 3136*128 and fc2 128*10 three times each.
flops=$(awk 'BEGIN { c1 = 28*28*32*9; c2 = 14*14*64*32*9; f1 = 3136*128; f2 = 128*10;
  printf "%.3f", 2 * 32 * (2*c1 + 3*(c2 + f1 + f2)) * 1e-9 }')
if grep -q "^compute: $flops GFLOP per iteration" "$WORK/out"; then
  ok "--report: $flops GFLOP per iteration"
else
  fail "--report: not $flops GFLOP per iteration: $(grep '^compute' "$WORK/out")"
fi
grep -q '^tasks per iteration: [0-9.]* (.*sgd [0-9.]*.*); transfers [0-9.]*$' "$WORK/out" &&
  ok "--report: tasks by kind" || fail "--report: tasks by kind: $(grep '^tasks' "$WORK/out")"

# The report of the run: rows for ranks 0 and 1 (columns: rank compute work
# comm exposed overlap idle images/s).
for r in 0 1; do
  row=$(awk -v r=$r '$1 == r && NF == 8' "$WORK/out")
  if [ -z "$row" ]; then
    fail "no report row for rank $r"
    continue
  fi
  if echo "$row" | awk '{ exit !($4 > 0 && $6 >= 0 && $6 <= 1 && $8 > 0) }'; then
    ok "rank $r: communication $(echo "$row" | awk '{print $4}') ms > 0, overlap $(echo "$row" | awk '{print $6}') in [0, 1]"
  else
    fail "rank $r: bad report row: $row"
  fi
done
finish
