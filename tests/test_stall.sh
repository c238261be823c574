# Stall watchdog (--stall-timeout): a stall injected at iteration 3
# (SC_TEST_STALL: one rank never posts the messages of one transfer, never
# joins one collective, or one of its tasks never finishes) on 2 and 4
# ranks, under sample, spatial and channel splits, ends the job with exit
# status 4 within seconds; every rank prints one line of what it waits
# for, and the summary names the rank that did not reach the point the
# others wait at and what they wait for there.  Without a stall, a run
# with the same short timeout ends normally.
. "$TOP_SRCDIR/tests/common.sh"

TIMEOUT=4 # seconds without progress
common="--model $MODELS/lenet.cfg --batch 32 --test off --iters 40 --log-every 1 --stall-timeout $TIMEOUT"

# stall NP GRID SPEC RANK WAIT: the job under SC_TEST_STALL=SPEC ends with 4,
# one line per rank, and a summary naming RANK that holds the text WAIT.
stall() {
  np=$1 grid=$2 spec=$3 rank=$4 wait=$5
  t0=$(date +%s)
  SC_TEST_STALL=$spec SC_TEST_TIMEOUT=120 run "$np" 1 $common --parallel "$grid" >"$WORK/out" 2>&1
  rc=$?
  secs=$(($(date +%s) - t0))
  lines=$(grep -c '^starconv-train: rank [0-9]*: no progress for ' "$WORK/out")
  summary=$(grep '^starconv-train: stalled: ' "$WORK/out")
  if [ $rc -eq 4 ] && [ "$lines" -eq "$np" ] && [ "$(printf '%s\n' "$summary" | grep -c .)" -eq 1 ] &&
    printf '%s\n' "$summary" | grep -q "^starconv-train: stalled: rank $rank did not reach the point .*$wait"; then
    ok "$np ranks, $grid, $spec: exit 4 after ${secs} s: ${summary#starconv-train: }"
  else
    grep -v '^epoch' "$WORK/out" | tail -8
    fail "$np ranks, $grid, $spec: exit $rc (want 4), $lines rank lines (want $np), summary '$summary' (want rank $rank, /$wait/)"
  fi
}

# Sample parallelism: a ring's message, a direct collective, a task.
stall 2 n2 send:fc1.grad_allreduce@3:0 0 "where rank 1 waits: a message from rank 0 (fc1.grad_allreduce, tag"
stall 2 n2 send:fc2.grad_allreduce@3:1 1 "where rank 0 waits: the collective fc2.grad_allreduce of iteration [0-9]* over ranks 0,1"
stall 4 n4 task:conv2.fwd@3:2 2 "rank 2 waits for its task conv2.fwd of iteration 3, running for"
# Spatial: a halo.
stall 2 h2 send:conv2.halo_x@3:1 1 "where rank 0 waits: a message from rank 1 (conv2.halo_x, tag"
stall 4 h2w2 send:conv2.halo_x@3:3 3 "where rank [0-2] waits: a message from rank 3 (conv2.halo_x, tag"
# Channels and filters: partial sums and gathered errors.
stall 2 c2 send:conv2.dy_allgather@3:0 0 "where rank 1 waits: a message from rank 0 (conv2.dy_allgather, tag"
stall 4 c2f2 send:conv2.reduce_scatter@3:1 1 "where rank [0-3] waits: a message from rank 1 (conv2.reduce_scatter, tag"
stall 4 f4 task:conv2.fwd@3:1 1 "rank 1 waits for its task conv2.fwd of iteration 3"

# No stall, the same timeout: no alarm.
if run 2 1 $common --iters 10 --parallel h2 >"$WORK/out" 2>&1 && ! grep -q 'no progress' "$WORK/out"; then
  ok "no stall, 2 ranks, --stall-timeout $TIMEOUT: no alarm"
else
  tail -5 "$WORK/out"
  fail "no stall: the run did not end normally"
fi

# A bad spec is refused (exit 2, one line).
SC_TEST_STALL=hang:conv2.fwd@3 run 1 1 $common --iters 1 >"$WORK/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "SC_TEST_STALL: 'hang:conv2.fwd@3' is not task:NAME" "$WORK/out" &&
  ok "a bad SC_TEST_STALL: exit 2" || fail "a bad SC_TEST_STALL: exit $rc"
finish
