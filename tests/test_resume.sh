# Checkpoint and resume: a run killed (SIGKILL) after its periodic
# checkpoint and resumed from it ends with the same weights as the run that
# was never interrupted, bit for bit on the same ranks and workers, within
# 1e-6 on other rank counts; a save that fails (file size limit, as on a
# full disk) leaves the previous checkpoint intact.
. "$TOP_SRCDIR/tests/common.sh"

common="--model $MODELS/lenet.cfg --batch 32 --lr 0.05 --momentum 0.9 --shuffle on --seed 7 --test off --log-every 1"
mark="resume-$$"

# Every process of the killed run carries this marker in its environment.
kill_marked() {
  for env in /proc/[0-9]*/environ; do
    if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qx "SC_TEST_MARK=$mark"; then
      pid=${env#/proc/}
      kill -9 "${pid%/environ}" 2>/dev/null
    fi
  done
}
trap 'kill_marked; rm -rf "$WORK"' EXIT

# 1. A long run with a checkpoint every 3 iterations, killed once one exists
#    (and some iterations after it have run).
SC_TEST_MARK=$mark run 2 2 $common --iters 100000 --save-every 3 --save "$WORK/ck.st" >"$WORK/killed.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  grep -q "checkpoint of iteration 6 " "$WORK/killed.log" && break
  sleep 0.1
done
sleep 0.3
kill_marked
wait "$launcher" 2>/dev/null
ls "$WORK"/ck.st.tmp.* >/dev/null 2>&1 && echo "note: the kill interrupted a save; its temporary file stays"
k=$("$COMPARE" --show "$WORK/ck.st" 2>/dev/null | sed -n 's/^optimizer.iteration I64 \[\] = //p')
case $k in
  '' | *[!0-9]*)
    tail -5 "$WORK/killed.log"
    fail "no readable checkpoint after the kill"
    finish
    ;;
esac
last=$(grep -o 'iter [0-9]*' "$WORK/killed.log" | tail -1)
ok "killed at $last with a checkpoint of iteration $k"
end=$((k + 3))

# 2. The uninterrupted run to the same end, and the resumed one.
run 2 2 $common --iters $end --save "$WORK/full.st" >/dev/null 2>&1 || fail "uninterrupted run of $end iterations"
if run 2 2 $common --iters $end --resume "$WORK/ck.st" --save "$WORK/resumed.st" >"$WORK/resume.log" 2>&1 &&
  grep -q "resuming at iteration $k of $end" "$WORK/resume.log" &&
  "$COMPARE" "$WORK/resumed.st" "$WORK/full.st" 0 && cmp -s "$WORK/resumed.st" "$WORK/full.st"; then
  ok "resumed on 2 ranks x 2 workers: the same file as the uninterrupted run, byte for byte"
else
  tail -3 "$WORK/resume.log"
  fail "resume on 2 ranks x 2 workers differs from the uninterrupted run"
fi

# 3. Resumed on other rank and worker counts: the same up to summation
#    order.  The weights are held to 1e-6; the momentum buffers (gradients)
#    show it more, and are held to 1e-5.
for grid in "1 1" "4 1"; do
  set -- $grid
  if run "$1" "$2" $common --iters $end --resume "$WORK/ck.st" --save "$WORK/r$1.st" >/dev/null 2>&1 &&
    "$COMPARE" "$WORK/r$1.st" "$WORK/full.st" 1e-6 momentum=1e-5 >"$WORK/cmp"; then
    ok "resumed on $1 rank(s) x $2 worker(s): weights within 1e-6 of the uninterrupted run: $(cat "$WORK/cmp")"
  else
    fail "resume on $1 rank(s) x $2 worker(s)"
  fi
done

# 4. Options that change the data order are refused (exit 2, one line).
run 1 1 $common --iters $end --resume "$WORK/ck.st" --seed 8 >"$WORK/out" 2>"$WORK/err"
if [ $? -eq 2 ] && grep -q "saved with --seed 7, this run has --seed 8" "$WORK/err"; then
  ok "resume with another --seed refused"
else
  fail "resume with another --seed: $(head -1 "$WORK/err")"
fi

# 5. A save that cannot complete (the file size limit stands in for a full
#    disk): an error, and the previous checkpoint stays as it was.
cp "$WORK/full.st" "$WORK/keep.st"
cp "$WORK/full.st" "$WORK/before.st"
STARPU_NCPU=1 "$MPIRUN" 1 sh -c 'ulimit -f 200 && exec "$@"' sh "$TRAIN" --data "$DATA" $common --iters 2 \
  --save "$WORK/keep.st" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "keep.st" "$WORK/err" && cmp -s "$WORK/keep.st" "$WORK/before.st" &&
  ! ls "$WORK"/keep.st.tmp.* >/dev/null 2>&1; then
  ok "failed save (exit $rc: $(grep keep.st "$WORK/err" | head -1)): previous checkpoint intact, no temporary left"
else
  cat "$WORK/err"
  fail "failed save: exit $rc, previous checkpoint changed or temporary file left"
fi
finish
