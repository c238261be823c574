# bench/starconv-bench layer: argument checks, the commands it runs
# (--dry-run), the numbers it reads from a trace (a canned trace through
# stand-ins for mpirun and starconv-train), and one real tiny run
# (--scale 0.125) of starconv-train on 1 and 2 ranks.
# common.sh skips the tests without the data set, which this one does not read.
[ -d "${SC_TEST_DATA:-/usr/share/datasets/fashion-mnist}" ] || SC_TEST_DATA=${TOP_SRCDIR:-.}
. "$TOP_SRCDIR/tests/common.sh"

BENCH="$TOP_SRCDIR/bench/starconv-bench"
mkdir -p "$WORK/tmp"

# mpirun stand-in: drops its options up to and including "-np N" and runs
# the rest once.
cat >"$WORK/mpirun" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != -np ]; do shift; done
[ $# -ge 3 ] || { echo "mpirun stub: no -np N PROGRAM" >&2; exit 99; }
shift 2
exec "$@"
EOF
# starconv-train stand-in: copies $STUB_TRACE to --trace FILE and prints the
# last line of a run; exits 3 on --parallel h2 when STUB_FAIL=1.
cat >"$WORK/train" <<'EOF'
#!/bin/sh
trace='' par=''
while [ $# -gt 0 ]; do
  case $1 in
  --trace) trace=$2; shift ;;
  --parallel) par=$2; shift ;;
  esac
  shift
done
[ -n "$trace" ] || { echo "train stub: no --trace" >&2; exit 98; }
if [ "${STUB_FAIL:-0}" = 1 ] && [ "$par" = h2 ]; then echo "train stub: boom" >&2; exit 3; fi
cp "$STUB_TRACE" "$trace" || exit 97
echo "starconv-train: 6 iterations, 123.4 images/s, test accuracy not measured"
EOF
chmod +x "$WORK/mpirun" "$WORK/train"

# A trace of iterations 2..4 on 2 ranks (times in us from o = 1000 * it):
# rank 0: conv1.fwd [o, o+100] and [o+150, o+200] (span 200), conv1.relu_bwd
#   [o+300, o+310] and conv1.bwd_filter [o+310, o+400] (span 100), halos
#   conv1.halo_x [o+90, o+160] and conv1.halo_dy [o+120, o+140]: exposed 50
#   (90..100 and 150..160 computing).
# rank 1: conv1.fwd [o, o+150+20*it] (190, 210, 230), conv1.bwd_data
#   [o+300, o+350] and conv1.bwd_filter [o+360, o+380] (span 80), a task
#   [o+650, o+720] and conv1.halo_x [o+600, o+700+40*(it-2)]: exposed 50,
#   70, 110; conv2.halo_x [o+800, o+900] is another layer's.
# Per iteration, the largest over the ranks: fwd 200, 210, 230; bwd 100;
# exposed 50, 70, 110.  Medians: 0.210, 0.100 and 0.070 ms.
/usr/bin/python3 - "$WORK/trace.json" <<'EOF'
import json, sys
ev = []
def meta(pid, tid, name):
    ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
def x(pid, tid, name, s, e, it):
    ev.append({"name": name, "cat": name.rsplit(".", 1)[-1], "ph": "X", "pid": pid, "tid": tid,
               "ts": float(s), "dur": float(e - s), "args": {"iteration": it}})
for r in (0, 1):
    meta(r, 0, "cpu 0")
    meta(r, 1000, "comm")
for it in (2, 3, 4):
    o = 1000 * it
    x(0, 0, "conv1.fwd", o, o + 100, it)
    x(0, 0, "conv1.fwd", o + 150, o + 200, it)
    x(0, 0, "conv1.relu_bwd", o + 300, o + 310, it)
    x(0, 0, "conv1.bwd_filter", o + 310, o + 400, it)
    x(0, 1000, "conv1.halo_x", o + 90, o + 160, it)
    x(0, 1000, "conv1.halo_dy", o + 120, o + 140, it)
    x(1, 0, "conv1.fwd", o, o + 150 + 20 * it, it)
    x(1, 0, "conv1.bwd_data", o + 300, o + 350, it)
    x(1, 0, "conv1.bwd_filter", o + 360, o + 380, it)
    x(1, 0, "conv2.fwd", o + 650, o + 720, it)
    x(1, 1000, "conv1.halo_x", o + 600, o + 700 + 40 * (it - 2), it)
    x(1, 1000, "conv2.halo_x", o + 800, o + 900, it)
doc = {"traceEvents": ev, "displayTimeUnit": "ms",
       "otherData": {"ranks": 2, "workers": 1, "first_iteration": 2, "last_iteration": 4,
                     "global_batch": 4, "model": "stub"}}
with open(sys.argv[1], "w") as f:
    json.dump(doc, f)
EOF
export STUB_TRACE="$WORK/trace.json"

# bench ARGS...: the layer benchmark with the stand-ins; stdout, stderr in
# $WORK/out, $WORK/err, exit status in $rc.
bench() {
  TMPDIR="$WORK/tmp" MPIRUN="$WORK/mpirun" STARCONV_TRAIN="$WORK/train" KEEP_LOGS=0 \
    bash "$BENCH" "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
}

# --help
bench layer --help
if [ $rc -eq 0 ] && grep -q 'starconv-bench layer \[--cases' "$WORK/out"; then
  ok "layer --help: usage, exit 0"
else
  fail "layer --help: exit $rc"
fi

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
bad "unknown argument '--bogus'" layer --bogus
bad "unknown argument '--model'" layer --model x
bad "--cases: unknown case 'vgg-conv1'" layer --cases "resnet50-conv1 vgg-conv1"
bad "--cases: 'resnet50-conv1' twice" layer --cases resnet50-conv1,resnet50-conv1
bad "--cases: empty list" layer --cases " "
bad "--cases needs a value" layer --cases
bad "--samples: 'x' is not a positive integer" layer --samples "1 x"
bad "--samples: '0' is not a positive integer" layer --samples 0
bad "--samples: 4 twice" layer --samples "4 4"
bad "--grid: 'c2' is not a grid" layer --grid c2
bad "--grid: 'h2h2': 'h' appears twice" layer --grid h2h2
bad "--grid: 'h0'" layer --grid h0
bad "--grid: 'n2' splits no image" layer --grid n2
bad "--grid: 'h2w2' has 4 ranks but --ranks is 2" layer --grid h2w2 --ranks 2
bad "--ranks: 1 is too few" layer --ranks 1
bad "--ranks: 'two'" layer --ranks two
bad "--iters: 1 is too few" layer --iters 1
bad "--iters: '-3'" layer --iters -3
bad "--runs: '0'" layer --runs 0
bad "--ncpu: '1.5'" layer --ncpu 1.5
bad "--scale: '0' is not a positive number" layer --scale 0
bad "--scale: 'big' is not a positive number" layer --scale big
bad "--scale: 0.02 makes the images of resnet50-conv1 4x4" layer --scale 0.02
bad "--csv: no directory" layer --csv "$WORK/nope/t.csv"

# --dry-run, the defaults: 7 configurations (resnet50-conv1 N=1 spatial
# cannot run) x 3 runs, taking turns, with the right grids and batches
bench layer --dry-run
n=$(grep -c . "$WORK/out")
if [ $rc -eq 0 ] && [ "$n" -eq 21 ]; then ok "dry run: 21 commands"; else fail "dry run: exit $rc, $n commands (want 21)"; fi
good=1
for want in "1 synthetic:3x224x224:10 1 n1" "2 synthetic:3x224x224:10 4 n2" "2 synthetic:3x224x224:10 4 h2" \
  "1 synthetic-mesh:1024 1 n1" "2 synthetic-mesh:1024 1 h2" "2 synthetic-mesh:1024 4 n2" "2 synthetic-mesh:1024 4 h2"; do
  # shellcheck disable=SC2086 # four words on purpose
  set -- $want
  pat="-np $1 env STARPU_NCPU=1 STARPU_SILENT=1 OMP_NUM_THREADS=1 $WORK/train --model [^ ]* --data $2 --batch $3 --iters 6 --parallel $4 --test off --shuffle off --trace [^ ]*\.trace\.json --trace-iters 2:6\$"
  c=$(grep -c -- "^$WORK/mpirun --allow-run-as-root --oversubscribe $pat" "$WORK/out")
  c1=$(head -n 7 "$WORK/out" | grep -c -- "$pat")
  if [ "$c" -ne 3 ] || [ "$c1" -ne 1 ]; then
    fail "dry run: '$want': $c commands, $c1 in the first 7 (want 3, 1)"
    good=0
  fi
done
[ $good = 1 ] && ok "dry run: every configuration 3 times, once per repetition, grids and batches as expected"
if grep -q 'resnet50-conv1.cfg' "$WORK/out" && grep -q 'mesh1k-conv1_1.cfg' "$WORK/out" &&
  grep -q "^starconv-bench: not run: resnet50-conv1 N=1 spatial (h2): .*whole samples" "$WORK/err"; then
  ok "dry run: a cfg per case; resnet50-conv1 N=1 spatial named as not run"
else
  fail "dry run: cfg names or the note on resnet50-conv1 N=1 spatial"
  cat "$WORK/err"
fi
# --grid h2w2: 4 ranks; the sample runs of N=4 on 4 ranks (n4), of N=2 on 2
bench layer --dry-run --grid h2w2 --cases mesh1k-conv1_1 --samples "1 2 4" --runs 1 --iters 3 --scale 0.125 --ncpu 2 --extra "--seed 7"
got=$(sed -n 's/.* -np \([0-9]*\) env STARPU_NCPU=2 .* --data \([^ ]*\) --batch \([0-9]*\) --iters 3 --parallel \([a-z0-9]*\) .* --trace-iters 2:3 --seed 7$/\1:\2:\3:\4/p' "$WORK/out" | tr '\n' ' ')
want="1:synthetic-mesh:128:1:n1 4:synthetic-mesh:128:1:h2w2 2:synthetic-mesh:128:2:n2 4:synthetic-mesh:128:2:h2w2 4:synthetic-mesh:128:4:n4 4:synthetic-mesh:128:4:h2w2 "
if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then
  ok "dry run --grid h2w2: ranks, batches, grids, --scale, --ncpu, --extra"
else
  fail "dry run --grid h2w2: exit $rc: $got"
fi

# the numbers read from a trace (the canned one, for every configuration)
bench layer --cases mesh1k-conv1_1 --samples 4 --runs 2 --csv "$WORK/t.csv"
rows=$(grep '^mesh1k-conv1_1 ' "$WORK/out" | awk '{ print $2, $3, $4, $5, $6, $7, $8, $9 }')
want="4 sample 2 n2 0.210 0.100 0.070 123.4
4 spatial 2 h2 0.210 0.100 0.070 123.4"
if [ $rc -eq 0 ] && [ "$rows" = "$want" ]; then
  ok "canned trace: fwd and bwd spans, exposed halo (max over ranks, median over iterations)"
else
  fail "canned trace: exit $rc, table:"
  cat "$WORK/out" "$WORK/err"
fi
if grep -q '^case  *N  *partition  *ranks  *grid  *fwd_ms  *bwd_ms  *exposed_halo_ms  *images_per_s$' "$WORK/out" &&
  [ "$(grep -E '^(case|mesh1k)' "$WORK/out" | awk '{ print index($0, $9) + length($9) }' | sort -u | wc -l)" -eq 1 ]; then
  ok "table: header, images_per_s column aligned"
else
  fail "table: header or alignment"
  cat "$WORK/out"
fi
want="case,N,partition,ranks,grid,fwd_ms,bwd_ms,exposed_halo_ms,images_per_s
mesh1k-conv1_1,4,sample,2,n2,0.210,0.100,0.070,123.4
mesh1k-conv1_1,4,spatial,2,h2,0.210,0.100,0.070,123.4"
if [ "$(cat "$WORK/t.csv" 2>/dev/null)" = "$want" ]; then ok "--csv"; else fail "--csv:"; cat "$WORK/t.csv"; fi
n=$(grep -cE '^\[[1-4]/4\] mesh1k-conv1_1 N=4 (sample n2|spatial h2) run [12]: fwd ' "$WORK/err")
if [ "$n" -eq 4 ]; then ok "4 progress lines"; else fail "$n progress lines (want 4)"; cat "$WORK/err"; fi
if [ -z "$(ls -A "$WORK/tmp")" ]; then ok "logs removed"; else fail "logs left in $WORK/tmp"; fi

# a failing run: "failed" in its row, exit status 1, logs kept
rm -rf "$WORK/tmp"/*
STUB_FAIL=1 bench layer --cases mesh1k-conv1_1 --samples 4 --runs 1
if [ $rc -eq 1 ] && grep -q '^mesh1k-conv1_1  *4  *spatial  *2  *h2  *failed' "$WORK/out" &&
  grep -q '^mesh1k-conv1_1  *4  *sample  *2  *n2  *0.210' "$WORK/out" &&
  grep -q 'train stub: boom' "$WORK/err" && [ -n "$(ls -A "$WORK/tmp")" ]; then
  ok "failed run: reported, exit 1, error shown, logs kept"
else
  fail "failed run: exit $rc (want 1):"
  cat "$WORK/out" "$WORK/err"
fi

# One real run of every configuration, images 1/8 of the size, through
# tests/mpirun.sh (its time limit and Open MPI settings).
cat >"$WORK/mpirun-real" <<EOF
#!/bin/sh
while [ \$# -gt 0 ] && [ "\$1" != -np ]; do shift; done
np=\$2
shift 2
exec "$MPIRUN" "\$np" "\$@"
EOF
chmod +x "$WORK/mpirun-real"
rm -rf "$WORK/tmp"/*
SC_TEST_TIMEOUT=${SC_TEST_TIMEOUT:-120} TMPDIR="$WORK/tmp" MPIRUN="$WORK/mpirun-real" STARCONV_TRAIN="$TRAIN" \
  bash "$BENCH" layer --scale 0.125 --runs 1 --iters 3 --csv "$WORK/real.csv" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -eq 0 ] && grep -q '^# resnet50-conv1 3x28x28, mesh1k-conv1_1 18x128x128;' "$WORK/out"; then
  ok "real run (--scale 0.125): exit 0"
else
  fail "real run: exit $rc"
  cat "$WORK/out" "$WORK/err"
fi
# rows: the 8 configurations; numbers positive, exposed halo 0 when sample
# parallel; resnet50-conv1 N=1 spatial n/a
got=$(awk -F, 'NR > 1 { print $1, $2, $3, $4, $5 }' "$WORK/real.csv" 2>/dev/null | tr '\n' ',')
want="resnet50-conv1 1 sample 1 n1,resnet50-conv1 1 spatial 2 h2,resnet50-conv1 4 sample 2 n2,resnet50-conv1 4 spatial 2 h2,"
want+="mesh1k-conv1_1 1 sample 1 n1,mesh1k-conv1_1 1 spatial 2 h2,mesh1k-conv1_1 4 sample 2 n2,mesh1k-conv1_1 4 spatial 2 h2,"
if [ "$got" = "$want" ]; then ok "real run: a row per configuration"; else fail "real run: rows: $got"; fi
bad_rows=$(awk -F, 'NR > 1 {
    if ($1 == "resnet50-conv1" && $2 == 1 && $3 == "spatial") { if ($6 != "n/a") print; next }
    if (!($6 > 0 && $7 > 0 && $9 > 0 && $8 >= 0)) { print; next }
    if ($3 == "sample" && $8 != 0) print
  }' "$WORK/real.csv" 2>/dev/null)
if [ -s "$WORK/real.csv" ] && [ -z "$bad_rows" ]; then
  ok "real run: fwd, bwd, images/s positive; no exposed halo when sample parallel"
else
  fail "real run: rows:"
  printf '%s\n' "$bad_rows"
  cat "$WORK/out"
fi
finish
