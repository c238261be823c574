# Checkpoint on a signal (--checkpoint-signal): SIGUSR1 to mpirun (which
# forwards it to every rank) and SIGTERM to one rank alone, in the middle
# of an epoch, end the run on every rank with the --save checkpoint, one
# line and exit status 75; --resume from it ends with the same file, byte
# for byte, as the run that was never interrupted.  The same on one rank.
# A second signal ends the run at once, without 75.  Leaves no process
# behind.
. "$TOP_SRCDIR/tests/common.sh"

common="--model $MODELS/lenet.cfg --batch 32 --lr 0.05 --momentum 0.9 --shuffle on --seed 7 --test off --log-every 1"
bg= # the job's launcher (run in the background)

descendants() {
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}
cleanup() {
  if [ -n "$bg" ] && kill -0 "$bg" 2>/dev/null; then
    for p in $(descendants "$bg"); do kill -KILL "$p" 2>/dev/null; done
    kill -KILL "$bg" 2>/dev/null
  fi
  bg=
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM HUP

# rank_pid R: the PID of rank R of the job; mpirun_pid: its launcher's
# (rank 0's parent).
rank_pid() {
  for p in $(descendants "$bg"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"
      return
    fi
  done
}
mpirun_pid() {
  r0=$(rank_pid 0)
  [ -n "$r0" ] && ps -o ppid= -p "$r0" | tr -d ' '
}

# start NP: lenet for ever in the background, output in $WORK/out; returns
# once iteration 5 is out (1 if not within 120 s).
start() {
  : >"$WORK/out"
  rm -f "$WORK/ck.st"
  STARPU_NCPU=1 SC_TEST_TIMEOUT=150 "$MPIRUN" "$1" "$TRAIN" --data "$DATA" $common --iters 100000 \
    --save "$WORK/ck.st" --checkpoint-signal >"$WORK/out" 2>&1 &
  bg=$!
  for _ in $(seq 600); do
    grep -q ' iter 5 ' "$WORK/out" && return 0
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.2
  done
  cat "$WORK/out"
  return 1
}

# stopped NAME SIGNAL: the job ends with 75, one line naming the signal
# and the checkpoint's iteration, which the file holds; then resumed for 3
# iterations more, it ends with the uninterrupted run's file.
stopped() {
  name=$1 sig=$2
  wait "$bg"
  rc=$?
  bg=
  line=$(grep "^starconv-train: $sig" "$WORK/out")
  it=$(printf '%s\n' "$line" | sed -n 's/.*stopped after iteration \([0-9]*\) with its checkpoint in .*/\1/p')
  k=$("$COMPARE" --show "$WORK/ck.st" 2>/dev/null | sed -n 's/^optimizer.iteration I64 \[\] = //p')
  if [ $rc -eq 75 ] && [ "$(printf '%s\n' "$line" | grep -c .)" -eq 1 ] && [ -n "$it" ] && [ "$it" = "$k" ] &&
    [ "$k" -gt 5 ] && ! ls "$WORK"/ck.st.tmp.* >/dev/null 2>&1; then
    ok "$name: exit 75, $line"
  else
    tail -5 "$WORK/out"
    fail "$name: exit $rc (want 75), line '$line', checkpoint of iteration '$k'"
    return
  fi
  end=$((k + 3))
  np=$3
  if run "$np" 1 $common --iters $end --save "$WORK/full.st" >/dev/null 2>&1 &&
    run "$np" 1 $common --iters $end --resume "$WORK/ck.st" --save "$WORK/resumed.st" >"$WORK/resume.log" 2>&1 &&
    grep -q "resuming at iteration $k of $end" "$WORK/resume.log" && cmp -s "$WORK/resumed.st" "$WORK/full.st"; then
    ok "$name: resumed to iteration $end, the same file as the uninterrupted run, byte for byte"
  else
    tail -3 "$WORK/resume.log"
    fail "$name: resumed run differs from the uninterrupted one"
  fi
}

# 1. SIGUSR1 to mpirun, which forwards it to both ranks.
if start 2 && p=$(mpirun_pid) && [ -n "$p" ] && kill -USR1 "$p"; then
  stopped "SIGUSR1 to mpirun, 2 ranks" SIGUSR1 2
else
  fail "SIGUSR1 to mpirun: the job did not start"
fi
cleanup

# 2. SIGTERM to rank 1 alone: rank 0 stops after the same iteration.
if start 2 && p=$(rank_pid 1) && [ -n "$p" ] && kill -TERM "$p"; then
  stopped "SIGTERM to rank 1 alone, 2 ranks" SIGTERM 2
else
  fail "SIGTERM to rank 1: the job did not start"
fi
cleanup

# 3. One rank.
if start 1 && p=$(rank_pid 0) && [ -n "$p" ] && kill -TERM "$p"; then
  stopped "SIGTERM, 1 rank" SIGTERM 1
else
  fail "SIGTERM on 1 rank: the job did not start"
fi
cleanup

# 4. A second signal right after the first: the rank ends by it, at once.
if start 2 && p=$(rank_pid 1) && [ -n "$p" ] && kill -TERM "$p" && sleep 0.3 && kill -TERM "$p"; then
  t0=$(date +%s)
  wait "$bg"
  rc=$?
  bg=
  secs=$(($(date +%s) - t0))
  if [ $rc -ne 0 ] && [ $rc -ne 75 ] && [ $secs -le 30 ]; then
    ok "a second SIGTERM: the job ended in ${secs} s with status $rc"
  else
    tail -3 "$WORK/out"
    fail "a second SIGTERM: status $rc after ${secs} s"
  fi
else
  fail "a second SIGTERM: the job did not start"
fi
cleanup

# 5. Without --save there is nothing to write: refused at start-up.
run 1 1 $common --iters 1 --checkpoint-signal >"$WORK/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "^starconv-train: --checkpoint-signal needs --save FILE" "$WORK/out" &&
  ok "--checkpoint-signal without --save: exit 2" || fail "--checkpoint-signal without --save: exit $rc"
finish
