# bench/starconv-bench sweep: argument checks, the commands it runs
# (--dry-run), and a sweep over stand-ins for mpirun and starconv-train
# (table order, medians over 3 runs, failed runs).  Needs neither MPI, nor
# the real binary, nor the data set.
# common.sh skips the tests without the data set, which this one does not read.
[ -d "${SC_TEST_DATA:-/usr/share/datasets/fashion-mnist}" ] || SC_TEST_DATA=${TOP_SRCDIR:-.}
. "$TOP_SRCDIR/tests/common.sh"

BENCH="$TOP_SRCDIR/bench/starconv-bench"
M="$MODELS/lenet.cfg"
mkdir -p "$WORK/tmp" "$WORK/state"

# mpirun stand-in: drops its options up to and including "-np N" (noting N)
# and runs the rest once.
cat >"$WORK/mpirun" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != -np ]; do shift; done
[ $# -ge 3 ] || { echo "mpirun stub: no -np N PROGRAM" >&2; exit 99; }
echo "$2" >"$STUB_STATE/np"
shift 2
exec "$@"
EOF
# starconv-train stand-in: --list-sched, and a canned overlap report whose
# images/s depends on --sched and --grad-comm, and on how many times this
# combination ran before: base, base + 300, base - 30 (median: base, mean
# not); overlap 0.500, 0.900, 0.600 (n/a for dmda); exposed 1, 2, 5.
# --sched bad fails; --sched norep exits 0 without a report.
cat >"$WORK/train" <<'EOF'
#!/bin/bash
sched='' gc='' report=0 model=''
while [ $# -gt 0 ]; do
  case $1 in
  --list-sched) echo "eager lws dmda"; exit 0 ;;
  --sched) sched=$2; shift ;;
  --grad-comm) gc=$2; shift ;;
  --model) model=$2; shift ;;
  --report) report=1 ;;
  esac
  shift
done
[ "$report" = 1 ] || { echo "train stub: no --report" >&2; exit 98; }
case $sched in
eager) base=1000 ;; lws) base=3000 ;; dmda) base=2000 ;;
norep) echo "starconv-train: 5 iterations, 10.0 images/s, test accuracy not measured"; exit 0 ;;
bad) echo "some noise"; echo "train stub: boom" >&2; exit 3 ;;
*) echo "train stub: unknown policy '$sched'" >&2; exit 2 ;;
esac
case $gc in layer) add=0 ;; end) add=500 ;; *) add=100 ;; esac
f="$STUB_STATE/$sched-${gc%%:*}"
n=$(cat "$f" 2>/dev/null || echo 0)
echo $((n + 1)) >"$f"
case $n in 0) d=0 o=0.500 e=1.0 ;; 1) d=300 o=0.900 e=2.0 ;; *) d=-30 o=0.600 e=5.0 ;; esac
[ "$sched" = dmda ] && o=n/a
rate=$((base + add + d))
echo "overlap report: $model, 2 ranks x ${STARPU_NCPU:-?} workers, iterations 2..5, times in ms per iteration"
echo "rank  compute_ms  work_ms  comm_ms  exposed_ms  overlap  idle_ms  images/s"
echo "0        12.345    12.345    3.210       $e    $o    0.100    $rate.0"
echo "1        12.345    12.345    3.210       $e    $o    0.100    $rate.0"
echo "mean     12.345    12.345    3.210       $e    $o    0.100    $rate.0"
echo "starconv-train: 5 iterations, $rate.0 images/s, test accuracy not measured"
EOF
chmod +x "$WORK/mpirun" "$WORK/train"
export STUB_STATE="$WORK/state"

# bench ARGS...: the sweep with the stand-ins; stdout, stderr in $WORK/out,
# $WORK/err, exit status in $rc.
bench() {
  TMPDIR="$WORK/tmp" MPIRUN="$WORK/mpirun" STARCONV_TRAIN="$WORK/train" KEEP_LOGS=0 \
    bash "$BENCH" "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
}

# --help
for h in --help "sweep --help"; do
  # shellcheck disable=SC2086 # two words on purpose
  bench $h
  if [ $rc -eq 0 ] && grep -q 'starconv-bench sweep --model M --ranks P' "$WORK/out"; then
    ok "$h: usage, exit 0"
  else
    fail "$h: exit $rc"
  fi
done

# bad arguments: exit 2 and a first line naming the problem
bad() {
  want=$1
  shift
  bench "$@"
  first=$(head -n 1 "$WORK/err")
  if [ $rc -eq 2 ] && printf '%s\n' "$first" | grep -q -- "^starconv-bench: .*$want"; then
    ok "bad arguments ($*): $first"
  else
    fail "bad arguments ($*): exit $rc (want 2), '$first' (want /$want/)"
  fi
}
bad "no command" # no command
bad "unknown command 'swoop'" swoop --model "$M" --ranks 2
bad "unknown argument '--bogus'" sweep --model "$M" --ranks 2 --bogus
bad "--model is required" sweep --ranks 2
bad "--ranks is required" sweep --model "$M"
bad "no model file" sweep --model "$WORK/nope.cfg" --ranks 2
bad "--ranks: '0'" sweep --model "$M" --ranks 0
bad "--ranks: 'two'" sweep --model "$M" --ranks two
bad "--iters: '-5'" sweep --model "$M" --ranks 2 --iters -5
bad "--batch: '1.5'" sweep --model "$M" --ranks 2 --batch 1.5
bad "--runs: '0'" sweep --model "$M" --ranks 2 --runs 0
bad "--ncpu: ''" sweep --model "$M" --ranks 2 --ncpu ''
bad "--iters needs a value" sweep --model "$M" --ranks 2 --iters
bad "does not split evenly over 3 ranks" sweep --model "$M" --ranks 3 --batch 64

# --dry-run: policies x grad-comm x runs commands, the combinations taking
# turns, with what was asked for
bench sweep --model "$M" --ranks 2 --ncpu 3 --iters 7 --batch 32 --runs 2 \
  --policies "lws eager dmda" --grad-comm "layer bucket:4" --extra "--lr 0.05 --seed 9" --dry-run
n=$(grep -c . "$WORK/out")
if [ $rc -eq 0 ] && [ "$n" -eq 12 ]; then ok "dry run: 12 commands"; else fail "dry run: exit $rc, $n commands (want 12)"; fi
good=1
for s in lws eager dmda; do
  for g in layer bucket:4; do
    c=$(grep -c -- "--sched $s --grad-comm $g --report" "$WORK/out")
    c1=$(head -n 6 "$WORK/out" | grep -c -- "--sched $s --grad-comm $g --report")
    if [ "$c" -ne 2 ] || [ "$c1" -ne 1 ]; then
      fail "dry run: $s $g: $c commands, $c1 in the first 6 (want 2, 1)"
      good=0
    fi
  done
done
want="^$WORK/mpirun --allow-run-as-root --oversubscribe -np 2 env STARPU_NCPU=3 STARPU_SILENT=1 OMP_NUM_THREADS=1 $WORK/train --model $M --batch 32 --iters 7 --test off --shuffle off --sched [a-z]* --grad-comm [a-z:0-9]* --report --lr 0.05 --seed 9\$"
c=$(grep -c -- "$want" "$WORK/out")
[ "$c" -eq 12 ] || { fail "dry run: $c of 12 commands as expected"; head -n 1 "$WORK/out"; good=0; }
[ $good = 1 ] && ok "dry run: every combination twice, once per repetition, with the arguments given"
# default policies (--list-sched) and grad-comm modes
bench sweep --model "$M" --ranks 2 --dry-run
n=$(grep -c . "$WORK/out")
got=$(sed -n 's/.*--sched \([^ ]*\) --grad-comm \([^ ]*\) .*/\1:\2/p' "$WORK/out" | tr '\n' ' ')
want="eager:layer eager:chunks:2 eager:bucket:1 eager:end lws:layer lws:chunks:2 lws:bucket:1 lws:end dmda:layer dmda:chunks:2 dmda:bucket:1 dmda:end "
if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then
  ok "dry run: default policies from --list-sched, default grad-comm modes"
else
  fail "dry run with the defaults: exit $rc, $n commands: $got"
fi
# --net RATE: every run inside bench/slow-net
bench sweep --model "$M" --ranks 2 --policies lws --grad-comm "layer end" --net 1gbit --dry-run
c=$(grep -c "/bench/slow-net --rate 1gbit -- $WORK/mpirun --allow-run-as-root" "$WORK/out")
if [ $rc -eq 0 ] && [ "$c" -eq 2 ]; then
  ok "dry run --net 1gbit: both runs through bench/slow-net"
else
  fail "dry run --net 1gbit: exit $rc, $c of 2 commands through bench/slow-net"
  head -n 2 "$WORK/out"
fi
bad "--net: '1 gbit' is not a rate" sweep --model "$M" --ranks 2 --net "1 gbit"

# a sweep: 3 policies x 2 modes x 3 runs
rm -f "$WORK/state"/*
bench sweep --model "$M" --ranks 2 --ncpu 1 --runs 3 --policies "eager lws dmda" --grad-comm "layer end"
table=$(grep -E '^(eager|lws|dmda) ' "$WORK/out" | awk '{ print $1, $2, $3, $4, $5, $6 }')
want="lws end 3500.0 0.600 2.000 3
lws layer 3000.0 0.600 2.000 3
dmda end 2500.0 n/a 2.000 3
dmda layer 2000.0 n/a 2.000 3
eager end 1500.0 0.600 2.000 3
eager layer 1000.0 0.600 2.000 3"
if [ $rc -eq 0 ] && [ "$table" = "$want" ]; then
  ok "sweep: table best first, medians over 3 runs"
else
  fail "sweep: exit $rc, table:"
  cat "$WORK/out" "$WORK/err"
fi
if grep -q '^policy  *grad-comm  *images/s  *overlap  *exposed_ms  *runs$' "$WORK/out" &&
  [ "$(grep -E '^(policy|eager|lws|dmda) ' "$WORK/out" | awk '{ print index($0, $3) + length($3) }' | sort -u | wc -l)" -eq 1 ]; then
  ok "sweep: header, images/s column aligned"
else
  fail "sweep: header or alignment"
  cat "$WORK/out"
fi
if grep -q '^best: .*lws .*end .*3500.0' "$WORK/out"; then ok "sweep: best named"; else fail "sweep: no best line"; fi
n=$(grep -cE '^\[[0-9]+/18\] (eager|lws|dmda) (layer|end) run [123]: [0-9.]+ images/s$' "$WORK/err")
if [ "$n" -eq 18 ]; then ok "sweep: 18 progress lines"; else fail "sweep: $n progress lines (want 18)"; cat "$WORK/err"; fi
if [ "$(cat "$WORK/state/np" 2>/dev/null)" = 2 ]; then ok "sweep: -np 2"; else fail "sweep: -np not 2"; fi
if [ -z "$(ls -A "$WORK/tmp")" ]; then ok "sweep: logs removed"; else fail "sweep: logs left in $WORK/tmp"; fi

# failed runs: "failed" in the table (last), exit status 1, the stderr of
# the failing program shown once, logs kept, the other runs still done
rm -rf "$WORK/state"/* "$WORK/tmp"/*
bench sweep --model "$M" --ranks 2 --runs 2 --policies "bad lws norep" --grad-comm "layer"
table=$(grep -E '^(bad|lws|norep) ' "$WORK/out" | awk '{ print $1, $2, $3, $6 }')
want="lws layer 3150.0 2
bad layer failed 0/2
norep layer failed 0/2"
boom=$(grep -c 'train stub: boom' "$WORK/err")
if [ $rc -eq 1 ] && [ "$table" = "$want" ] && [ "$boom" -eq 1 ] &&
  grep -q '^best: .*lws .*layer' "$WORK/out" && grep -q 'logs in ' "$WORK/err" &&
  [ -n "$(ls -A "$WORK/tmp")" ]; then
  ok "failed runs: reported, exit 1, error shown once, logs kept"
else
  fail "failed runs: exit $rc (want 1), boom shown $boom times, table:"
  cat "$WORK/out" "$WORK/err"
fi
bench sweep --model "$M" --ranks 2 --policies "bad" --grad-comm "layer"
if [ $rc -eq 1 ] && grep -q '^best: none' "$WORK/out"; then
  ok "every run failed: exit 1, no best"
else
  fail "every run failed: exit $rc"
  cat "$WORK/out"
fi
finish
