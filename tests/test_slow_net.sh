# bench/slow-net: lenet on 2 ranks through a loopback throttled to 200
# Mbit/s trains to the weights of the unthrottled run, its bytes really
# cross the throttled link, and an interrupted run leaves no process, no
# namespace and no qdisc behind; the same for --per-rank (each rank in a
# namespace of its own on a link of its own), whose interrupted run also
# leaves no link and no temporary file.  Skipped (77) where namespaces or
# tc are missing (not root, no iproute2); the --per-rank part alone is
# skipped where only it cannot run (no bridge or veth in the kernel).
. "$TOP_SRCDIR/tests/common.sh"

SLOW="$TOP_SRCDIR/bench/slow-net"

# stop_within_60s PID WHAT: SIGTERM to PID, then wait up to 60 s for it to
# end (a failure if it does not; it is then killed) and reap it.
stop_within_60s() {
  kill -TERM "$1" 2>/dev/null
  for _ in $(seq 1 60); do
    kill -0 "$1" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1" 2>/dev/null
    fail "$2 did not end within 60 s of SIGTERM"
  fi
  wait "$1" 2>/dev/null
}
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
stop_within_60s "$pid" "bench/slow-net"
sleep 1
left=$(pgrep -f "$TRAIN .*--iters 100000" || true)
if [ -z "$left" ] && [ "$(ip netns list 2>/dev/null | sort)" = "$netns_before" ] &&
  [ "$(tc qdisc show dev lo)" = "$qdisc_before" ]; then
  ok "interrupted: no rank, namespace or qdisc left"
else
  [ -n "$left" ] && kill -KILL $left 2>/dev/null
  fail "interrupted: left behind: processes '${left}', netns '$(ip netns list 2>/dev/null)', qdisc '$(tc qdisc show dev lo)'"
fi

# ---- --per-rank

"$SLOW" --rate 1gbit --per-rank --ranks 2 -- true 2>"$WORK/probe"
case $? in
0) ;;
77) echo "SKIP --per-rank: $(cat "$WORK/probe")"; finish ;;
*) cat "$WORK/probe"; fail "bench/slow-net --rate 1gbit --per-rank --ranks 2 -- true"; finish ;;
esac

# Each rank sends and receives its own gradients over its own link: each
# of the two links carries more than 1 MB each way, and as above the
# weights are those of the shared-memory run.
if STARPU_NCPU=1 STARPU_SILENT=1 timeout 300 "$SLOW" --rate 200mbit --per-rank -- $mpi "$TRAIN" $args \
  --save "$WORK/per-rank.st" >"$WORK/per-rank.out" 2>&1; then
  if out=$("$COMPARE" "$WORK/per-rank.st" "$WORK/ref.st" 0); then
    ok "--per-rank through 200mbit: the weights of the reference run ($out)"
  else
    echo "$out"
    fail "--per-rank through 200mbit: weights differ"
  fi
else
  cat "$WORK/per-rank.out"
  fail "the run through bench/slow-net --rate 200mbit --per-rank"
fi
for n in 1 2; do
  line=$(grep "^slow-net: 192\.0\.2\.$n: " "$WORK/per-rank.out")
  sent=$(echo "$line" | sed -n 's/.*: \([0-9]*\) bytes sent, \([0-9]*\) bytes received .*/\1/p')
  received=$(echo "$line" | sed -n 's/.*: \([0-9]*\) bytes sent, \([0-9]*\) bytes received .*/\2/p')
  if [ -n "$sent" ] && [ -n "$received" ] && [ "$sent" -gt 1000000 ] && [ "$received" -gt 1000000 ]; then
    ok "--per-rank: node 192.0.2.$n sent $sent and received $received bytes over its own link"
  else
    grep slow-net "$WORK/per-rank.out"
    fail "--per-rank: the link of node 192.0.2.$n did not carry its rank's bytes ('$line')"
  fi
done

# Interrupted: as above, and while it runs the two ranks must be in two
# network namespaces of their own (neither the host's nor each other's).
# Afterwards none of the namespaces of the run's processes may be held by
# any process, and the host's links, qdiscs, /run/netns and temporary
# directories must be as before.  Checked by what this run made, not by
# counts: other jobs on the machine may make and drop namespaces meanwhile.
descendants() {
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}
all_netns() {
  for p in /proc/[0-9]*; do readlink "$p/ns/net" 2>/dev/null; done | sort -u
}
host_state() {
  ip -br link
  tc qdisc show
  ls -A /run/netns 2>/dev/null
  ls -d "${TMPDIR:-/tmp}"/slow-net.* 2>/dev/null
}
host_before=$(host_state)
hostns=$(readlink /proc/self/ns/net)
STARPU_NCPU=1 STARPU_SILENT=1 "$SLOW" --rate 200mbit --per-rank -- $mpi "$TRAIN" $args --iters 100000 \
  >"$WORK/int-pr.out" 2>&1 &
pid=$!
ranks='' tree=''
for _ in $(seq 1 60); do
  tree=$(descendants "$pid")
  ranks=$(for p in $tree; do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = starconv-train ] && echo "$p"; done)
  [ "$(echo $ranks | wc -w)" -ge 2 ] && break
  sleep 1
done
sleep 2 # training under way
tree=$(descendants "$pid")
run_netns=$(for p in $tree; do readlink "/proc/$p/ns/net" 2>/dev/null; done | sort -u | grep -vxF "$hostns")
rank_netns=$(for p in $ranks; do readlink "/proc/$p/ns/net" 2>/dev/null; done | sort -u | grep -vxF "$hostns")
if [ "$(echo $rank_netns | wc -w)" -eq 2 ]; then
  ok "--per-rank: the 2 ranks run in 2 network namespaces of their own ($(echo $rank_netns))"
else
  fail "--per-rank: ranks '$(echo $ranks)' in namespaces '$(echo $rank_netns)', not 2 of their own"
fi
start=$(date +%s)
stop_within_60s "$pid" "bench/slow-net --per-rank"
took=$(($(date +%s) - start))
sleep 1
alive=$(for p in $tree; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
held=$(all_netns | grep -xF "$run_netns")
if [ -z "$tree" ] || [ -z "$run_netns" ]; then
  fail "interrupted --per-rank: no process or namespace of the run seen while it ran"
elif [ -z "$alive" ] && [ -z "$held" ] && [ "$(host_state)" = "$host_before" ]; then
  ok "interrupted --per-rank: ended ${took} s after SIGTERM; none of its $(echo $tree | wc -w) processes and $(echo $run_netns | wc -w) namespaces left, host links, qdiscs, /run/netns and temporary files as before"
else
  [ -n "$alive" ] && ps -o pid,args -p "$(echo $alive | tr ' ' ,)"
  echo "host before:"
  echo "$host_before"
  echo "host after:"
  host_state
  fail "interrupted --per-rank: left behind: processes '$(echo $alive)', namespaces '$(echo $held)'"
fi
finish
