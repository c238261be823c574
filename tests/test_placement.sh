# Where the CPU workers run (src/runtime/cpubind.c), read from the running
# processes, not only from what they print:
# - mpirun -np 1, which binds the rank to one core: the rank takes the
#   node's cores, one worker per core, each worker thread bound to a core of
#   its own (its Cpus_allowed_list in /proc);
# - STARPU_NCPU=2 under mpirun --bind-to core -np 2: one warning naming the
#   cores, the binding and the fix;
# - -np 4 on fewer cores (oversubscribed): trains, matches 1 rank;
# - the placement in --metrics and in the trace's otherData.
# Nothing here is timed.
. "$TOP_SRCDIR/tests/common.sh"

ncores=$(getconf _NPROCESSORS_ONLN) # nproc heeds OMP_NUM_THREADS
if [ "$ncores" -lt 2 ]; then
  echo "SKIP: needs 2 cores (this machine has $ncores)"
  exit 77
fi
want_workers=$ncores
[ "$want_workers" -le 4 ] || want_workers=4 # Debian's StarPU: at most 4

# 1. One rank under mpirun's default binding, default worker count.
# Long enough to read its threads, then killed (SC_TEST_TIMEOUT=0: $! is
# mpirun itself, which takes its rank with it).
common="--model $MODELS/lenet.cfg --batch 16 --test off --shuffle off --seed 7"
env -u STARPU_NCPU SC_TEST_TIMEOUT=0 "$MPIRUN" 1 "$TRAIN" --data "$DATA" $common --iters 20000 \
  >"$WORK/long.out" 2>"$WORK/long.err" &
launcher=$!
pid= affinities=
# Up to 3 minutes: a loaded machine (make -j check) can be slow to start it.
for _ in $(seq 1 900); do
  # The first match may be a process that has since exited (a wrapper).
  [ -z "$pid" ] || [ -d /proc/"$pid" ] || pid=
  if [ -z "$pid" ]; then
    pid=$(pgrep -f "^$TRAIN --data" | head -n 1)
  fi
  if [ -n "$pid" ]; then
    affinities=
    for task in /proc/"$pid"/task/*; do
      case $(cat "$task/comm" 2>/dev/null) in
        sc-cpu*) affinities="$affinities $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$task/status")" ;;
      esac
    done
    # Workers bind themselves after they start: wait for the last one.
    set -- $affinities
    if [ $# -ge "$want_workers" ] && grep -q "CPU workers on" "$WORK/long.err" &&
       ! printf '%s\n' $affinities | grep -q '[-,]'; then
      break
    fi
  fi
  sleep 0.2
done
kill "$launcher" 2>/dev/null
wait "$launcher" 2>/dev/null
[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null
line=$(grep -m1 "CPU workers* on" "$WORK/long.err")
echo "start-up line: $line"
echo "worker threads' CPUs:$affinities"
case $line in
  "[rank 0] $want_workers CPU workers on cores 0-$((want_workers - 1)) (bound by the launcher to core "*"; alone on its node: all of its cores)")
    ok "1 rank: $want_workers workers on the node's cores" ;;
  *) fail "1 rank: start-up line '$line'" ;;
esac
set -- $affinities
distinct=$(printf '%s\n' $affinities | sort -u | wc -l)
if [ $# -eq "$want_workers" ] && [ "$distinct" -eq "$want_workers" ] &&
   ! printf '%s\n' $affinities | grep -q '[-,]'; then
  ok "1 rank: each of the $# worker threads is bound to one CPU, all distinct:$affinities"
else
  fail "1 rank: worker threads' CPUs:$affinities (want $want_workers single, distinct CPUs)"
fi

# 2. More workers than the launcher's binding gives: kept, with one warning.
STARPU_NCPU=2 SC_MPIRUN_FLAGS="--bind-to core" "$MPIRUN" 2 "$TRAIN" --data "$DATA" $common --iters 2 \
  >"$WORK/warn.out" 2>"$WORK/warn.err"
rc=$?
nwarn=$(grep -c "warning: STARPU_NCPU=2" "$WORK/warn.err")
warn=$(grep -m1 "warning: STARPU_NCPU=2" "$WORK/warn.err")
echo "warning: $warn"
case $warn in
  *"STARPU_NCPU=2 CPU workers, but this rank has 1 core (core "[0-9]*", as bound by the launcher): its workers share cores; give each rank 2 cores (mpirun --bind-to none, or --map-by ppr:2:node:PE=2)")
    if [ "$rc" -eq 0 ] && [ "$nwarn" -eq 1 ] && grep -q "2 ranks x 2 CPU workers" "$WORK/warn.err"; then
      ok "--bind-to core, STARPU_NCPU=2: one warning, the 2 workers kept, the run completes"
    else
      fail "--bind-to core, STARPU_NCPU=2: exit $rc, $nwarn warnings"
    fi ;;
  *) fail "--bind-to core, STARPU_NCPU=2: warning '$warn'"; cat "$WORK/warn.err" ;;
esac

# 3. Oversubscribed: 4 ranks, default worker count, against 1 rank x 1 worker.
train_args="$common --lr 0.05 --momentum 0.9 --iters 5"
run 1 1 $train_args --save "$WORK/ref.st" >/dev/null 2>&1 || fail "1-rank reference run"
env -u STARPU_NCPU "$MPIRUN" 4 "$TRAIN" --data "$DATA" $train_args --save "$WORK/np4.st" \
  --metrics "$WORK/np4.jsonl" --trace "$WORK/np4.trace.json" --trace-iters 2:3 >/dev/null 2>"$WORK/np4.err"
rc=$?
if [ $rc -eq 0 ] && "$COMPARE" "$WORK/np4.st" "$WORK/ref.st" 1e-5; then
  ok "4 ranks on $ncores cores, default workers: matches 1 rank"
else
  fail "4 ranks on $ncores cores: exit $rc or weights differ"
fi
if [ "$ncores" -lt 4 ]; then
  n=$(grep -c "1 CPU worker on cores 0-$((ncores - 1)) (not bound by the launcher; more ranks than cores on the node: workers not bound)" "$WORK/np4.err")
  [ "$n" -eq 4 ] && ok "4 ranks on $ncores cores: 1 worker each, unbound" ||
    { fail "4 ranks on $ncores cores: $n of 4 placement lines as expected"; cat "$WORK/np4.err"; }
fi

# 4. The placement in --metrics (first record) and in the trace.
first=$(head -n 1 "$WORK/np4.jsonl")
echo "metrics: $first"
case $first in
  '{"ranks": 4, "placement": ["1 CPU worker on '*'", "1 CPU worker on '*'", "1 CPU worker on '*'", "1 CPU worker on '*'"]}')
    ok "--metrics starts with the 4 ranks' placement" ;;
  *) fail "--metrics first record: $first" ;;
esac
if grep -q '"placement":\["1 CPU worker on [^"]*","1 CPU worker on [^"]*","1 CPU worker on [^"]*","1 CPU worker on [^"]*"\]' "$WORK/np4.trace.json" &&
   [ "$(grep -o '"name":"process_labels"' "$WORK/np4.trace.json" | wc -l)" -eq 4 ]; then
  ok "the trace's otherData and process labels hold the placement"
else
  fail "no placement in the trace"
fi
finish
