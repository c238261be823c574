# Rank failure: when one rank of a 3-rank run dies (SIGKILL) or stops
# responding (SIGSTOP), the others end within 30 s with a message naming it;
# and a normal run with a short peer timeout, where one rank finishes late,
# raises no false alarm.  Leaves no process behind.
. "$TOP_SRCDIR/tests/common.sh"

LIMIT=30 # seconds allowed from the signal to the end of the job
pids=    # the ranks of the job under test, recorded as soon as known
bg=      # the job's launcher (run in the background)

# The ranks of a job may outlive its launcher (re-parented), so they are
# killed by the PIDs recorded, after checking that a PID still is ours.
cleanup() {
  for p in $pids; do
    if [ -r "/proc/$p/cmdline" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q starconv-train; then
      kill -CONT "$p" 2>/dev/null
      kill -KILL "$p" 2>/dev/null
    fi
  done
  if [ -n "$bg" ] && kill -0 "$bg" 2>/dev/null; then
    for p in $(descendants "$bg"); do kill -KILL "$p" 2>/dev/null; done
    kill -KILL "$bg" 2>/dev/null
  fi
  pids= bg=
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM HUP

descendants() {
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}

# rank_pid R: the PID of rank R among the job's processes.
rank_pid() {
  for p in $(descendants "$bg"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"
      return
    fi
  done
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# start ENV...: 3 ranks x 1 worker training lenet in the background, output
# in $WORK/out; returns once the first progress line is out, with the ranks'
# PIDs in $pids (1 if that does not happen within 120 s).
start() {
  : >"$WORK/out"
  env "$@" STARPU_NCPU=1 SC_TEST_TIMEOUT=150 "$MPIRUN" 3 "$TRAIN" --data "$DATA" \
    --model "$MODELS/lenet.cfg" --epochs 1 --batch 63 --log-every 1 >"$WORK/out" 2>&1 &
  bg=$!
  t=$(now)
  while ! grep -q ' iter [0-9]' "$WORK/out"; do
    if ! kill -0 "$bg" 2>/dev/null || [ "$(awk -v a="$t" -v b="$(now)" 'BEGIN { print (b - a > 120) }')" = 1 ]; then
      cat "$WORK/out"
      return 1
    fi
    sleep 0.2
  done
  pids=
  for r in 0 1 2; do pids="$pids $(rank_pid $r)"; done
  victim=$(rank_pid 1)
  [ -n "$victim" ]
}

# wait_end T0: waits for the job (at most LIMIT + 15 s); sets rc and secs.
wait_end() {
  while kill -0 "$bg" 2>/dev/null; do
    if [ "$(awk -v a="$1" -v b="$(now)" -v l="$LIMIT" 'BEGIN { print (b - a > l + 15) }')" = 1 ]; then
      break
    fi
    sleep 0.1
  done
  secs=$(elapsed "$1")
  if kill -0 "$bg" 2>/dev/null; then
    rc=hung
    cleanup
  else
    wait "$bg"
    rc=$?
  fi
  bg=
}

in_time() { awk -v s="$secs" -v l="$LIMIT" 'BEGIN { exit !(s < l) }'; }

# 1. SIGKILL of rank 1 (mpirun notices it by itself).
if start; then
  t0=$(now)
  kill -KILL "$victim"
  wait_end "$t0"
  echo "SIGKILL of rank 1: job ended after ${secs} s, status $rc"
  named='process rank 1 \|: rank 1 has not been heard from'
  if [ "$rc" != hung ] && [ "$rc" -ne 0 ] && in_time && grep -q "$named" "$WORK/out"; then
    ok "SIGKILL: ${secs} s: $(grep -m1 "$named" "$WORK/out")"
  else
    fail "SIGKILL: status $rc after ${secs} s (want non-zero within ${LIMIT} s, naming rank 1)"
    cat "$WORK/out"
  fi
else
  fail "SIGKILL: the run did not start"
fi
cleanup

# 2. SIGSTOP of rank 1: only the watchdog of rank 2 (its successor) can tell.
if start SC_PEER_TIMEOUT=5; then
  t0=$(now)
  kill -STOP "$victim"
  wait_end "$t0"
  echo "SIGSTOP of rank 1: job ended after ${secs} s, status $rc"
  line=$(grep -m1 '^starconv-train: rank 2: rank 1 has not been heard from for [0-9]* s' "$WORK/out")
  if [ "$rc" = 4 ] && in_time && [ -n "$line" ]; then
    ok "SIGSTOP: ${secs} s: $line"
  else
    fail "SIGSTOP: status $rc after ${secs} s (want status 4 within ${LIMIT} s and the watchdog's line)"
    cat "$WORK/out"
  fi
  sleep 1
  state=$(awk '{ print $3 }' "/proc/$victim/stat" 2>/dev/null)
  case $state in
    '' | Z) ;;
    *) echo "note: the stopped rank was left in state $state by mpirun; killing it" ;;
  esac
else
  fail "SIGSTOP: the run did not start"
fi
cleanup

# 3. No false alarm: a 2 s timeout, a checkpoint, the test evaluation, and
# rank 0 finishing 5 s after the others (they wait for its goodbye).
t0=$(now)
SC_PEER_TIMEOUT=2 SC_TEST_FINISH_DELAY=0:5 SC_LOG_LEVEL=2 SC_TEST_TIMEOUT=150 \
  run 3 1 --model "$MODELS/lenet.cfg" --batch 63 --iters 120 --log-every 20 \
  --save "$WORK/ck.safetensors" >"$WORK/out" 2>&1 &
bg=$! # in the background, so that a signal to the test ends it at once
wait "$bg"
rc=$?
bg=
secs=$(elapsed "$t0")
echo "normal run with a 2 s timeout and rank 0 late by 5 s: ${secs} s, status $rc"
# The proof that the case was exercised: rank 1 waited for rank 0's
# goodbye longer than the timeout.
waited=$(grep -m1 'peer watchdog: waited [3-9]\.[0-9] s for rank 0' "$WORK/out")
if [ $rc -eq 0 ] && ! grep -q 'has not been heard\|has not taken\|stopping the job\|MPI_ABORT' "$WORK/out" &&
  grep -q 'test accuracy [0-9]' "$WORK/out" && [ -s "$WORK/ck.safetensors" ] && [ -n "$waited" ]; then
  ok "no false alarm: $waited"
else
  fail "false alarm or failed run: status $rc"
  cat "$WORK/out"
fi

finish
