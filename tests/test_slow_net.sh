# bench/slow-net: lenet on 2 ranks through a loopback throttled to 200
# Mbit/s trains to the weights of the unthrottled run, its bytes really
# cross the throttled link, and an interrupted run leaves no process, no
# namespace and no qdisc behind.  Skipped (77) where namespaces or tc are
# missing (not root, no iproute2).
. "$TOP_SRCDIR/tests/common.sh"

SLOW="$TOP_SRCDIR/bench/slow-net"
"$SLOW" --rate 1gbit -- true 2>"$WORK/probe"
case $? in
0) ;;
77) echo "SKIP: $(cat "$WORK/probe")"; exit 77 ;;
*) cat "$WORK/probe"; fail "bench/slow-net --rate 1gbit -- true"; finish ;;
esac

args="--data $DATA --model $MODELS/lenet.cfg --batch 32 --iters 5 --shuffle off --test off"
# Open MPI directly, not tests/mpirun.sh: its --mca btl would override the
# TCP-only transport slow-net sets.
mpi="mpirun --allow-run-as-root --oversubscribe --mca btl_base_warn_component_unused 0 -np 2"

if STARPU_NCPU=1 run 2 1 $args --save "$WORK/ref.st" >"$WORK/ref.out" 2>&1; then
  ok "reference run, shared memory"
else
  cat "$WORK/ref.out"
  fail "reference run"
fi

# The gradient sums are the same tasks in the same order whatever carries
# the bytes, so the weights are equal to the bit (tolerance 0).
if STARPU_NCPU=1 STARPU_SILENT=1 timeout 300 "$SLOW" --rate 200mbit -- $mpi "$TRAIN" $args --save "$WORK/slow.st" \
  >"$WORK/slow.out" 2>&1; then
  if out=$("$COMPARE" "$WORK/slow.st" "$WORK/ref.st" 0); then
    ok "through 200mbit: the weights of the reference run ($out)"
  else
    echo "$out"
    fail "through 200mbit: weights differ"
  fi
else
  cat "$WORK/slow.out"
  fail "the run through bench/slow-net --rate 200mbit"
fi
# lenet's gradients are 247 KB per iteration and rank each way: 5
# iterations move more than 1 MB over the link.
bytes=$(sed -n 's/^slow-net: \([0-9]*\) bytes in .*/\1/p' "$WORK/slow.out")
if [ -n "$bytes" ] && [ "$bytes" -gt 1000000 ]; then
  ok "$bytes bytes crossed the throttled loopback"
else
  grep slow-net "$WORK/slow.out"
  fail "the ranks' bytes did not cross the throttled loopback (${bytes:-no count})"
fi

# Interrupted: a long run, stopped after a few seconds with SIGTERM (a
# background job of a script ignores SIGINT; at a terminal, Ctrl-C does
# the same).  The namespace is anonymous and dies with its last process:
# nothing may remain.
netns_before=$(ip netns list 2>/dev/null | sort)
qdisc_before=$(tc qdisc show dev lo)
STARPU_NCPU=1 STARPU_SILENT=1 "$SLOW" --rate 200mbit -- $mpi "$TRAIN" $args --iters 100000 \
  >"$WORK/int.out" 2>&1 &
pid=$!
sleep 5
kill -TERM "$pid" 2>/dev/null
for _ in $(seq 1 60); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 1
done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid" 2>/dev/null
  fail "bench/slow-net did not end within 60 s of SIGTERM"
fi
wait "$pid" 2>/dev/null
sleep 1
left=$(pgrep -f "$TRAIN .*--iters 100000" || true)
if [ -z "$left" ] && [ "$(ip netns list 2>/dev/null | sort)" = "$netns_before" ] &&
  [ "$(tc qdisc show dev lo)" = "$qdisc_before" ]; then
  ok "interrupted: no rank, namespace or qdisc left"
else
  [ -n "$left" ] && kill -KILL $left 2>/dev/null
  fail "interrupted: left behind: processes '${left}', netns '$(ip netns list 2>/dev/null)', qdisc '$(tc qdisc show dev lo)'"
fi
finish
