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
# images/s depends on --sched, --grad-comm, --fc-replicate F (+50 F), the
# rate of the slow-net stand-in around it (1gbit -400, 200mbit -800), and on
# how many times this combination ran before: base, base + 300, base - 30
# (median: base, mean not); overlap 0.500, 0.900, 0.600 (n/a for dmda);
# exposed 1, 2, 5.  --sched bad fails; --sched norep exits 0 without a
# report.
cat >"$WORK/train" <<'EOF'
#!/bin/bash
sched='' gc='' report=0 model='' fc=0
while [ $# -gt 0 ]; do
  case $1 in
  --fc-replicate) fc=$2; shift ;;
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
case ${STUB_NET:-none} in none) sub=0 ;; 1gbit) sub=400 ;; 200mbit) sub=800 ;; *) sub=900 ;; esac
add=$((add + 50 * fc - sub))
f="$STUB_STATE/$sched-${gc%%:*}-${STUB_NET:-none}-$fc"
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
# bench/slow-net stand-in (the real one needs root): notes its rate, passes
# it to the train stand-in, runs the command after "--".
cat >"$WORK/slow-net" <<'EOF'
#!/bin/sh
[ "$1" = --rate ] && [ "$3" = -- ] || { echo "slow-net stub: $*" >&2; exit 99; }
echo "$2" >>"$STUB_STATE/slow-net"
STUB_NET=$2
export STUB_NET
shift 3
exec "$@"
EOF
chmod +x "$WORK/mpirun" "$WORK/train" "$WORK/slow-net"
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

# --net "RATE none" x --variants: bench/slow-net (found as $SLOW_NET, here
# its stand-in) only for the rate, a variant's arguments last (after
# --extra's; the empty one adds none); every combination once per
# repetition, in the order rate, policy, grad-comm mode, variant
export SLOW_NET="$WORK/slow-net"
bench sweep --model "$M" --ranks 2 --ncpu 1 --runs 2 --policies "lws eager" --grad-comm "layer end" \
  --net "1gbit none" --variants "--fc-replicate 0;--fc-replicate 1;" --extra "--lr 0.05" --dry-run
want=''
for n in 1gbit none; do
  for s in lws eager; do
    for g in layer end; do
      for v in " --fc-replicate 0" " --fc-replicate 1" ""; do
        [ $n = none ] || want+="$WORK/slow-net --rate $n -- "
        want+="$WORK/mpirun --allow-run-as-root --oversubscribe -np 2 env STARPU_NCPU=1 STARPU_SILENT=1 OMP_NUM_THREADS=1 $WORK/train --model $M --batch 64 --iters 30 --test off --shuffle off --sched $s --grad-comm $g --report --lr 0.05$v"$'\n'
      done
    done
  done
done
want+=$want
if [ $rc -eq 0 ] && [ "$(cat "$WORK/out")"$'\n' = "$want" ]; then
  ok "dry run --net '1gbit none' --variants (3): 48 commands, slow-net for 1gbit only, variants last, in order"
else
  fail "dry run --net '1gbit none' --variants: exit $rc, commands:"
  diff <(printf '%s' "$want") "$WORK/out" | head -n 10
fi
bad "--net: '1gbit fast' is not a rate list: 'fast' is not a rate" sweep --model "$M" --ranks 2 --net "1gbit fast"
bad "--net: '0mbit' is not a rate" sweep --model "$M" --ranks 2 --net 0mbit
bad "--net: empty list" sweep --model "$M" --ranks 2 --net " "
bad "--net: '1gbit' twice" sweep --model "$M" --ranks 2 --net "1gbit none 1gbit"
bad "--variants: '--seed 1' twice" sweep --model "$M" --ranks 2 --variants "--seed 1;--seed  1"
bad "--variants: the empty one twice" sweep --model "$M" --ranks 2 --variants ";"
bad "--csv: no directory '$WORK/nodir'" sweep --model "$M" --ranks 2 --csv "$WORK/nodir/s.csv"
bad "--csv: '$WORK' is a directory" sweep --model "$M" --ranks 2 --csv "$WORK"
bad "--runs: '0'" sweep --model "$M" --ranks 2 --runs 0 --csv "$WORK/never.csv"
if [ -e "$WORK/never.csv" ]; then fail "bad arguments: --csv written all the same"; else ok "bad arguments: no --csv file"; fi
unset SLOW_NET

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

# a sweep over 2 rates (1gbit through the slow-net stand-in, none) x 2
# policies x 2 modes x 2 variants, 3 runs each, with --csv
export SLOW_NET="$WORK/slow-net"
rm -rf "$WORK/state"/* "$WORK/tmp"/*
bench sweep --model "$M" --ranks 2 --ncpu 1 --runs 3 --policies "lws eager" --grad-comm "layer end" \
  --net "1gbit none" --variants "--fc-replicate 0;--fc-replicate 1" --csv "$WORK/sweep.csv"
unset SLOW_NET
table=$(grep -E '^(1gbit|none) ' "$WORK/out" | awk '{ $1 = $1; print }')
want="1gbit lws end --fc-replicate 1 3150.0 0.600 2.000 3
1gbit lws end --fc-replicate 0 3100.0 0.600 2.000 3
1gbit lws layer --fc-replicate 1 2650.0 0.600 2.000 3
1gbit lws layer --fc-replicate 0 2600.0 0.600 2.000 3
1gbit eager end --fc-replicate 1 1150.0 0.600 2.000 3
1gbit eager end --fc-replicate 0 1100.0 0.600 2.000 3
1gbit eager layer --fc-replicate 1 650.0 0.600 2.000 3
1gbit eager layer --fc-replicate 0 600.0 0.600 2.000 3
none lws end --fc-replicate 1 3550.0 0.600 2.000 3
none lws end --fc-replicate 0 3500.0 0.600 2.000 3
none lws layer --fc-replicate 1 3050.0 0.600 2.000 3
none lws layer --fc-replicate 0 3000.0 0.600 2.000 3
none eager end --fc-replicate 1 1550.0 0.600 2.000 3
none eager end --fc-replicate 0 1500.0 0.600 2.000 3
none eager layer --fc-replicate 1 1050.0 0.600 2.000 3
none eager layer --fc-replicate 0 1000.0 0.600 2.000 3"
if [ $rc -eq 0 ] && [ "$table" = "$want" ]; then
  ok "sweep --net --variants: table by rate, best first, medians over 3 runs"
else
  fail "sweep --net --variants: exit $rc, table:"
  cat "$WORK/out" "$WORK/err"
fi
# the images/s column right-aligned under its header
if grep -q '^net  *policy  *grad-comm  *variant  *images/s  *overlap  *exposed_ms  *runs$' "$WORK/out" &&
  [ "$(grep -E '^(net|1gbit|none) ' "$WORK/out" | awk 'NR == 1 { p = index($0, "images/s") + 7 } { print (NR == 1 || substr($0, p, 2) ~ /^[0-9] $/) }' | sort -u)" = 1 ]; then
  ok "sweep --net --variants: net and variant columns, images/s aligned"
else
  fail "sweep --net --variants: header or alignment"
  cat "$WORK/out"
fi
want="best: net 1gbit, --sched lws --grad-comm end, variant '--fc-replicate 1' (3150.0 images/s, overlap 0.600)
best: net none, --sched lws --grad-comm end, variant '--fc-replicate 1' (3550.0 images/s, overlap 0.600)"
if [ "$(grep '^best:' "$WORK/out")" = "$want" ]; then
  ok "sweep --net --variants: the best per rate"
else
  fail "sweep --net --variants: best lines:"
  grep '^best' "$WORK/out"
fi
n=$(grep -cE "^\[[0-9]+/48\] (lws|eager) (layer|end) net (1gbit|none) variant '--fc-replicate [01]' run [123]: [0-9.]+ images/s\$" "$WORK/err")
sn=$(sort "$WORK/state/slow-net" 2>/dev/null | uniq -c | awk '{ print $1, $2 }')
if [ "$n" -eq 48 ] && [ "$sn" = "24 1gbit" ]; then
  ok "sweep --net --variants: 48 progress lines, 24 runs through slow-net at 1gbit"
else
  fail "sweep --net --variants: $n progress lines (want 48), slow-net runs '$sn' (want '24 1gbit')"
fi
want="net,policy,grad_comm,variant,images_per_s,overlap,exposed_ms,runs_ok,runs
1gbit,lws,layer,--fc-replicate 0,2600.0,0.600,2.000,3,3
1gbit,lws,layer,--fc-replicate 1,2650.0,0.600,2.000,3,3
1gbit,lws,end,--fc-replicate 0,3100.0,0.600,2.000,3,3
1gbit,lws,end,--fc-replicate 1,3150.0,0.600,2.000,3,3
1gbit,eager,layer,--fc-replicate 0,600.0,0.600,2.000,3,3
1gbit,eager,layer,--fc-replicate 1,650.0,0.600,2.000,3,3
1gbit,eager,end,--fc-replicate 0,1100.0,0.600,2.000,3,3
1gbit,eager,end,--fc-replicate 1,1150.0,0.600,2.000,3,3
none,lws,layer,--fc-replicate 0,3000.0,0.600,2.000,3,3
none,lws,layer,--fc-replicate 1,3050.0,0.600,2.000,3,3
none,lws,end,--fc-replicate 0,3500.0,0.600,2.000,3,3
none,lws,end,--fc-replicate 1,3550.0,0.600,2.000,3,3
none,eager,layer,--fc-replicate 0,1000.0,0.600,2.000,3,3
none,eager,layer,--fc-replicate 1,1050.0,0.600,2.000,3,3
none,eager,end,--fc-replicate 0,1500.0,0.600,2.000,3,3
none,eager,end,--fc-replicate 1,1550.0,0.600,2.000,3,3"
if [ -f "$WORK/sweep.csv" ] && [ "$(cat "$WORK/sweep.csv")" = "$want" ] &&
  [ -z "$(find "$WORK" -maxdepth 1 -name 'sweep.csv?*')" ] && [ -z "$(ls -A "$WORK/tmp")" ]; then
  ok "sweep --csv: a header and 16 lines, the medians, no temporary file left"
else
  fail "sweep --csv:"
  cat "$WORK/sweep.csv"
  ls "$WORK"
fi
# a failed run: the CSV all the same, runs_ok below runs, n/a medians;
# a variant with a comma quoted; the empty variant empty (the stand-in
# ignores --seed: the second variant is the second run it counts, +300)
rm -rf "$WORK/state"/* "$WORK/tmp"/*
bench sweep --model "$M" --ranks 2 --policies "lws bad" --grad-comm end --variants ";--seed=1,2" --csv "$WORK/failed.csv"
want='net,policy,grad_comm,variant,images_per_s,overlap,exposed_ms,runs_ok,runs
none,lws,end,,3500.0,0.500,1.000,1,1
none,lws,end,"--seed=1,2",3800.0,0.900,2.000,1,1
none,bad,end,,n/a,n/a,n/a,0,1
none,bad,end,"--seed=1,2",n/a,n/a,n/a,0,1'
if [ $rc -eq 1 ] && [ "$(cat "$WORK/failed.csv" 2>/dev/null)" = "$want" ] &&
  grep -qE '^bad  *end  *-  *failed  *-  *-  *0/1 ok$' "$WORK/out"; then
  ok "sweep --csv with failed runs: written, runs_ok 0, n/a; variants quoted, empty, - in the table"
else
  fail "sweep --csv with failed runs: exit $rc"
  cat "$WORK/failed.csv" "$WORK/out"
fi

# plot: the sweep's CSV, policy lws (its first): one line per series, the
# legend, the shared-memory points, the medians in the markers' titles
bench plot "$WORK/sweep.csv" --svg "$WORK/sweep.svg"
svg="$WORK/sweep.svg"
good=1
if [ $rc -ne 0 ] || [ ! -s "$svg" ] || [ "$(head -c 5 "$svg")" != "<?xml" ] || [ "$(tail -n 1 "$svg")" != "</svg>" ]; then
  fail "plot: exit $rc, $(wc -c <"$svg" 2>/dev/null) bytes"
  good=0
fi
if command -v xmllint >/dev/null 2>&1 && ! xmllint --noout "$svg" 2>"$WORK/xml"; then
  fail "plot: not well-formed XML: $(head -n 1 "$WORK/xml")"
  good=0
fi
n=$(grep -c '<polyline' "$svg")
[ "$n" = 4 ] || { fail "plot: $n <polyline (want 4, one per series)"; good=0; }
for g in layer end; do
  for f in 0 1; do
    for t in ">$g --fc-replicate $f</text>" "<title>$g --fc-replicate $f at 1gbit: " "<title>$g --fc-replicate $f in shared memory: "; do
      grep -qF -- "$t" "$svg" || { fail "plot: no '$t'"; good=0; }
    done
  done
done
for t in "<title>end --fc-replicate 1 at 1gbit: 3150.0 images/s</title>" \
  "<title>layer --fc-replicate 0 in shared memory: 3000.0 images/s</title>" \
  ">shared</text>" ">memory</text>" "--sched lws</text>" "Gbit/s, log scale"; do
  grep -qF -- "$t" "$svg" || { fail "plot: no '$t'"; good=0; }
done
[ -z "$(find "$WORK" -maxdepth 1 -name 'sweep.svg?*')" ] || { fail "plot: temporary file left"; good=0; }
[ $good = 1 ] && ok "plot: 4 series, each a <polyline> with its legend entry, shared memory apart, the medians"
# --policy, --title (escaped), rates in any order and units (125mbps is
# 1gbit), a quoted variant, a failed row left out
cat >"$WORK/hand.csv" <<'EOF'
net,policy,grad_comm,variant,images_per_s,overlap,exposed_ms,runs_ok,runs
10gbit,lws,end,,1.0,n/a,n/a,1,1
1gbit,dmda,layer,"--lr 0.1,0.2",500.0,0.500,1.000,3,3
none,dmda,layer,"--lr 0.1,0.2",900.0,n/a,1.000,3,3
100mbit,dmda,layer,"--lr 0.1,0.2",100.0,0.500,1.000,3,3
10gbit,dmda,layer,"--lr 0.1,0.2",800.0,0.500,1.000,3,3
200mbit,dmda,layer,"--lr 0.1,0.2",n/a,n/a,n/a,0,3
125mbps,dmda,end,,150.0,0.500,1.000,3,3
EOF
bench plot "$WORK/hand.csv" --policy dmda --title 'wide <b64> & "x"' --svg "$WORK/hand.svg"
xs=$(grep -o '<polyline points="[^"]*"' "$WORK/hand.svg" | head -n 1 | sed 's/.*="//; s/"$//' | tr ' ' '\n' | cut -d, -f1 | tr '\n' ' ')
# shellcheck disable=SC2086 # one x a word
if [ $rc -eq 0 ] && [ "$(grep -c '<polyline' "$WORK/hand.svg")" = 2 ] &&
  [ "$(printf '%s\n' $xs | wc -l)" = 3 ] && [ "$(printf '%s\n' $xs | sort -g | tr '\n' ' ')" = "$xs" ] &&
  grep -qF '>wide &lt;b64&gt; &amp; &quot;x&quot;</text>' "$WORK/hand.svg" &&
  grep -qF '>layer --lr 0.1,0.2</text>' "$WORK/hand.svg" &&
  grep -qF '<title>end at 125mbps: 150.0 images/s</title>' "$WORK/hand.svg" &&
  grep -q '1 row(s) of policy dmda with failed runs left out' "$WORK/err"; then
  ok "plot --policy --title: 2 series, 3 points by bandwidth, escaped, failed row left out"
else
  fail "plot --policy --title: exit $rc, x $xs"
  cat "$WORK/err"
fi
# bad CSVs and arguments: one line on stderr, exit 2, no SVG
bad_plot() {
  want=$1
  shift
  rm -f "$WORK/bad.svg"
  bench plot "$@"
  if [ $rc -eq 2 ] && [ "$(wc -l <"$WORK/err")" = 1 ] && grep -q -- "^starconv-bench: .*$want" "$WORK/err" &&
    [ ! -e "$WORK/bad.svg" ] && [ -z "$(find "$WORK" -maxdepth 1 -name 'bad.svg?*')" ]; then
    ok "plot, bad: $(cat "$WORK/err")"
  else
    fail "plot, bad ($*): exit $rc (want 2), stderr: $(head -n 3 "$WORK/err")"
  fi
}
h=net,policy,grad_comm,variant,images_per_s,overlap,exposed_ms,runs_ok,runs
printf 'net,policy\n1gbit,lws\n' >"$WORK/bad1.csv"
printf '%s\n1gbit,lws,end,,1.0,n/a,n/a,1\n' "$h" >"$WORK/bad2.csv"
printf '%s\nfast,lws,end,,1.0,n/a,n/a,1,1\n' "$h" >"$WORK/bad3.csv"
printf '%s\n1gbit,lws,end,"x,1.0,n/a,n/a,1,1\n' "$h" >"$WORK/bad4.csv"
printf '%s\n1gbit,lws,end,,fast,n/a,n/a,1,1\n' "$h" >"$WORK/bad5.csv"
printf '%s\n1gbit,lws,end,,1.0,n/a,n/a,1,1\n1gbit,lws,end,,2.0,n/a,n/a,1,1\n' "$h" >"$WORK/bad6.csv"
: >"$WORK/bad7.csv"
bad_plot "not a sweep CSV" "$WORK/bad1.csv" --svg "$WORK/bad.svg"
bad_plot "bad2.csv line 2: 8 fields" "$WORK/bad2.csv" --svg "$WORK/bad.svg"
bad_plot "line 2: net 'fast' is neither a rate" "$WORK/bad3.csv" --svg "$WORK/bad.svg"
bad_plot "line 2: bad quotes" "$WORK/bad4.csv" --svg "$WORK/bad.svg"
bad_plot "line 2: 'fast' is not a number" "$WORK/bad5.csv" --svg "$WORK/bad.svg"
bad_plot "line 3: a second row" "$WORK/bad6.csv" --svg "$WORK/bad.svg"
bad_plot "bad7.csv: empty" "$WORK/bad7.csv" --svg "$WORK/bad.svg"
bad_plot "no file '$WORK/nope.csv'" "$WORK/nope.csv" --svg "$WORK/bad.svg"
bad_plot "no rows for policy 'heft'" "$WORK/sweep.csv" --policy heft --svg "$WORK/bad.svg"
bad_plot "--svg OUT.svg is required" "$WORK/sweep.csv"
bad_plot "--svg: no directory '$WORK/nodir'" "$WORK/sweep.csv" --svg "$WORK/nodir/p.svg"
finish
