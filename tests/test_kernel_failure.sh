# A kernel that fails stops the run at the next sync point, on 1 and 2
# ranks: exit status 1 and one line naming the task, the kernel, the worker
# and the cause; a checkpoint --save-every wrote before the failure stays
# intact (bit-equal to a run without it stopped there), none is written
# after.  The failure is injected: SC_TEST_FAIL_KERNEL=NAME@ITERATION[:RANK]
# (codelets/codelets.h) makes the tasks named NAME of that iteration fail.
. "$TOP_SRCDIR/tests/common.sh"

lenet="--model $MODELS/lenet.cfg --batch 32 --test off"
iteration() { "$COMPARE" --show "$1" | sed -n 's/^optimizer.iteration I64 \[\] = //p'; }
# the last iteration a progress line was printed for
last_iter() { sed -n 's/.* iter \([0-9]*\) .*/\1/p' "$1" | tail -n 1; }
export SC_TEST_TIMEOUT=120 # a rank left waiting for another fails the test (status 124)

# check WHAT RC ERR PATTERN: status 1, and exactly one line of ERR names a
# kernel or the task, which matches PATTERN.
check() {
  what=$1 rc=$2 err=$3 pattern=$4
  lines=$(grep -c 'kernel \|SC_TEST_FAIL' "$err")
  line=$(grep 'kernel ' "$err" | head -n 1)
  if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && echo "$line" | grep -Eq "$pattern"; then
    ok "$what: exit 1: $line"
  else
    cat "$err"
    fail "$what: exit $rc, $lines lines naming the kernel (want exit 1 and one line matching '$pattern')"
  fi
}

# 1. One rank: conv2's forward fails in iteration 5; a progress line every
#    iteration is a sync point, so the run stops there, before printing the
#    loss of iteration 5, and the checkpoint of iteration 4 stays.
SC_TEST_FAIL_KERNEL=conv2.fwd@5 run 1 1 $lenet --iters 12 --log-every 1 --save-every 2 --save "$WORK/a.st" \
  >"$WORK/out" 2>"$WORK/err"
check "1 rank, conv2.fwd@5" $? "$WORK/err" \
  '^starconv-train: rank 0: kernel conv2\.fwd \(conv_fwd\) failed on worker cpu [0-9]+: injected failure \(SC_TEST_FAIL_KERNEL=conv2\.fwd@5\): training stopped; .*a\.st keeps the checkpoint of iteration 4$'
last=$(last_iter "$WORK/err")
if [ -n "$last" ] && [ "$last" -ge 4 ] && [ "$last" -le 5 ]; then
  ok "the run ended within one iteration of the failure (last progress line: iteration $last)"
else
  fail "the run went on after the failure in iteration 5 (last progress line: iteration '$last')"
fi
run 1 1 $lenet --iters 4 --save "$WORK/ref4.st" >/dev/null 2>&1
if [ "$(iteration "$WORK/a.st")" = 4 ] && "$COMPARE" "$WORK/a.st" "$WORK/ref4.st" 0 >/dev/null; then
  ok "the checkpoint kept is the one of iteration 4, bit for bit a 4-iteration run's"
else
  fail "the checkpoint kept is of iteration '$(iteration "$WORK/a.st")' or differs from a 4-iteration run's"
fi
if run 1 1 $lenet --iters 6 --resume "$WORK/a.st" --save "$WORK/r6.st" >/dev/null 2>"$WORK/err" &&
  [ "$(iteration "$WORK/r6.st")" = 6 ]; then
  ok "training resumes from it"
else
  cat "$WORK/err"
  fail "--resume from the checkpoint kept failed"
fi

# 2. Two ranks, a backward kernel failing on rank 1 alone, no progress line
#    before the save of iteration 4: the save's own check stops the run, on
#    both ranks, and the checkpoint of iteration 2 stays.
SC_TEST_FAIL_KERNEL=conv1.bwd_filter@4:1 run 2 1 $lenet --iters 12 --log-every 100 --save-every 2 \
  --save "$WORK/b.st" >"$WORK/out" 2>"$WORK/err"
check "2 ranks, conv1.bwd_filter@4 on rank 1" $? "$WORK/err" \
  '^starconv-train: rank 1: kernel conv1\.bwd_filter \(conv_bwd_filter\) failed on worker cpu [0-9]+: injected failure .*b\.st keeps the checkpoint of iteration 2$'
run 2 1 $lenet --iters 2 --save "$WORK/ref2.st" >/dev/null 2>&1
if [ "$(iteration "$WORK/b.st")" = 2 ] && "$COMPARE" "$WORK/b.st" "$WORK/ref2.st" 0 >/dev/null; then
  ok "the checkpoint kept is the one of iteration 2, bit for bit a 2-iteration run's"
else
  fail "the checkpoint kept is of iteration '$(iteration "$WORK/b.st")' or differs from a 2-iteration run's"
fi

# 3. Two ranks, the failure on both: one line (the lowest rank's), and the
#    final checkpoint is not written.
SC_TEST_FAIL_KERNEL=fc1.fwd@3 run 2 1 $lenet --iters 6 --log-every 1 --save "$WORK/c.st" >"$WORK/out" 2>"$WORK/err"
check "2 ranks, fc1.fwd@3 on both" $? "$WORK/err" \
  '^starconv-train: rank 0: kernel fc1\.fwd \(fc_fwd\) failed on worker cpu [0-9]+: .*c\.st was not written$'
last=$(last_iter "$WORK/err")
if [ ! -e "$WORK/c.st" ] && [ -n "$last" ] && [ "$last" -ge 2 ] && [ "$last" -le 3 ]; then
  ok "no checkpoint, and the run ended within one iteration (last progress line: iteration $last)"
else
  fail "a checkpoint was written, or the run went on (last progress line: iteration '$last')"
fi

# 4. A spec that is not NAME@ITERATION[:RANK] is bad input.
SC_TEST_FAIL_KERNEL=conv2.fwd run 1 1 $lenet --iters 1 >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "^starconv-train: SC_TEST_FAIL_KERNEL: 'conv2.fwd' is not NAME@ITERATION" "$WORK/err"; then
  ok "a bad SC_TEST_FAIL_KERNEL: exit 2: $(grep "^starconv-train:" "$WORK/err")"
else
  cat "$WORK/err"
  fail "a bad SC_TEST_FAIL_KERNEL: exit $rc"
fi
finish
