# bench/starconv-bench layer: argument checks, the commands it runs
# (--dry-run), the numbers it reads from a trace (a canned trace through
# stand-ins for mpirun and starconv-train), and one real tiny run
# (--scale 0.125) of starconv-train on 1 and 2 ranks; then --grids (channel
# and filter splits of one layer): its refusals, commands, cfgs, the
# columns read from a canned trace and --report-comm, a grid starconv-train
# refuses, and a real run of resnet50-conv5 under n2 and c2.
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
# last line of a run; exits 3 on --parallel h2 when STUB_FAIL=1; with
# --report-comm, prints its lines (rank 0: 1000 bytes, rank 1: 1200); copies
# --model FILE into $STUB_MODELS when set; refuses (exit 2) a --model FILE
# whose name ends with $STUB_REFUSE when set.
cat >"$WORK/train" <<'EOF'
#!/bin/sh
trace='' par='' comm=0 model=''
while [ $# -gt 0 ]; do
  case $1 in
  --trace) trace=$2; shift ;;
  --parallel) par=$2; shift ;;
  --model) model=$2; shift ;;
  --report-comm) comm=1 ;;
  esac
  shift
done
[ -n "$trace" ] || { echo "train stub: no --trace" >&2; exit 98; }
if [ "${STUB_FAIL:-0}" = 1 ] && [ "$par" = h2 ]; then echo "train stub: boom" >&2; exit 3; fi
[ -z "${STUB_MODELS:-}" ] || cp "$model" "$STUB_MODELS/" || exit 96
case $model in
*"${STUB_REFUSE:-/}")
  echo "starconv-train: conv2: its 512 output channels do not split evenly into 3 parts (parallel f3)" >&2
  exit 2 ;;
esac
cp "$STUB_TRACE" "$trace" || exit 97
if [ $comm = 1 ]; then
  printf 'gradient reduction, bytes sent per iteration\n%4s %14s\n%4d %14d\n%4d %14d\n' rank bytes 0 1000 1 1200
fi
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

# --grids: refusals
bad "--grids: 'c2x' is not a grid (letters n, c, f, h, w" layer --grids c2x
bad "--grids: 'c2c2': 'c' appears twice" layer --grids "n2 c2c2"
bad "--grids: 'f0': 'f' needs an extent of at least 1" layer --grids f0
bad "--grids: 'n4' has 4 ranks, more than --ranks 2" layer --grids "n2 n4" --ranks 2
bad "--grids: 'c2' twice" layer --grids "c2,c2"
bad "--grids: empty list" layer --grids " "
bad "--grid and --grids: give one" layer --grid h2 --grids c2
bad "--grids needs a value" layer --grids
bad "--scale: 0.05 makes the images of resnet50-conv5 0x0 (at least 1x1)" layer --cases resnet50-conv5 --grids c2 --scale 0.05

# --grids, the commands: each grid on its product of ranks, the other
# layers n<ranks>, the grid in the cfg's name, --report-comm; N=2 does not
# split over 4 ranks, conv1 (a first layer) takes no c
bench layer --dry-run --cases "resnet50-conv3 resnet50-conv5 resnet50-conv1" --grids "n4 c2 f4 n2c2" --samples "4 2" --runs 2
got=$(sed -n 's/.* -np \([0-9]*\) env STARPU_NCPU=1 .* --model [^ ]*\/\([a-z0-9-]*\)\.cfg --data \([^ ]*\) --batch \([0-9]*\) --iters 6 --parallel \(n[0-9]*\) --test off --shuffle off --trace [^ ]*\.trace\.json --trace-iters 2:6 --report-comm$/\1:\2:\3:\4:\5/p' "$WORK/out" | tr '\n' ' ')
one="4:resnet50-conv3-n4:synthetic:3x28x28:10:4:n4 2:resnet50-conv3-c2:synthetic:3x28x28:10:4:n2 "
one+="4:resnet50-conv3-f4:synthetic:3x28x28:10:4:n4 4:resnet50-conv3-n2c2:synthetic:3x28x28:10:4:n4 "
one+="2:resnet50-conv3-c2:synthetic:3x28x28:10:2:n2 "
one+="4:resnet50-conv5-n4:synthetic:3x7x7:10:4:n4 2:resnet50-conv5-c2:synthetic:3x7x7:10:4:n2 "
one+="4:resnet50-conv5-f4:synthetic:3x7x7:10:4:n4 4:resnet50-conv5-n2c2:synthetic:3x7x7:10:4:n4 "
one+="2:resnet50-conv5-c2:synthetic:3x7x7:10:2:n2 "
one+="4:resnet50-conv1-n4:synthetic:3x224x224:10:4:n4 4:resnet50-conv1-f4:synthetic:3x224x224:10:4:n4 "
if [ $rc -eq 0 ] && [ "$got" = "$one$one" ] && [ "$(grep -c . "$WORK/out")" -eq 24 ]; then
  ok "dry run --grids: ranks, cfgs, batches, --parallel of the other layers, --report-comm"
else
  fail "dry run --grids: exit $rc: $got"
  cat "$WORK/out"
fi
if grep -q "^starconv-bench: not run: resnet50-conv3 N=2 sample+channel (n2c2): .*2 sample(s) do not split over 4 ranks" "$WORK/err" &&
  grep -q "^starconv-bench: not run: resnet50-conv1 N=4 channel (c2): conv1 is the first layer" "$WORK/err" &&
  [ "$(grep -c "not run" "$WORK/err")" -eq 12 ]; then
  ok "dry run --grids: the 12 configurations not run, with their reasons"
else
  fail "dry run --grids: notes:"
  cat "$WORK/err"
fi

# --grids, the numbers read from a trace: conv2 (between conv1 and gap1) on
# 2 ranks, iterations 2..4, times in us from o = 1000 * it; rank 0:
#   conv1.fwd [o, o+10]; x into conv2's layout: conv2.redistribute.pack
#   [o+10, o+12], conv2.assemble [o+30, o+32]: 22; conv2.fwd [o+32, o+100];
#   partial sums: conv2.reduce_scatter.pack [o+100, o+105],
#   conv2.reduce_scatter [o+120, o+125]: 25; y out to gap1:
#   gap1.redistribute.pack [o+125, o+127], gap1.assemble [o+130, o+131]: 6;
#   gap1.fwd, gap1.bwd; dy back: pack [o+141, o+142], assemble [o+150,
#   o+151]: 10; conv2.relu_bwd [o+151, o+155]; dy allgather: pack [o+155,
#   o+157], conv2.dy_allgather [o+170, o+172]: 17; conv2.bwd_filter
#   [o+172, o+200], conv2.bwd_data [o+200, o+230]; dx back:
#   conv2.redistribute.pack [o+230, o+232], conv2.assemble [o+250, o+252],
#   less the ring's conv2.reduce_scatter [o+240, o+245] within: 17; the
#   ring: conv2.grad_allreduce [o+200, o+260] from the end of bwd_filter,
#   less bwd_data and the two redistribution tasks: 26; conv2.sgd after.
# rank 1: the same, but its ring ends 20 us later each iteration: 26, 46, 66.
# fwd 68; bwd 79 less the allgather's 17: 62; coll 25 + 17 = 42; redist
# 22 + 6 + 10 + 17 = 55; grad, medians of the largest: 46.
/usr/bin/python3 - "$WORK/trace-grids.json" <<'EOF'
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
    for r in (0, 1):
        ring_end = 260 + (20 * (it - 2) if r == 1 else 0)
        for name, s, e in (("conv1.fwd", 0, 10), ("conv2.redistribute.pack", 10, 12), ("conv2.assemble", 30, 32),
                           ("conv2.fwd", 32, 100), ("conv2.reduce_scatter.pack", 100, 105),
                           ("conv2.reduce_scatter", 120, 125), ("gap1.redistribute.pack", 125, 127),
                           ("gap1.assemble", 130, 131), ("gap1.fwd", 131, 132), ("gap1.bwd", 140, 141),
                           ("gap1.redistribute.pack", 141, 142), ("gap1.assemble", 150, 151),
                           ("conv2.relu_bwd", 151, 155), ("conv2.dy_allgather.pack", 155, 157),
                           ("conv2.dy_allgather", 170, 172), ("conv2.bwd_filter", 172, 200),
                           ("conv2.bwd_data", 200, 230), ("conv2.redistribute.pack", 230, 232),
                           ("conv2.reduce_scatter", 240, 245), ("conv2.assemble", 250, 252),
                           ("conv2.sgd", ring_end + 2, ring_end + 4)):
            x(r, 0, name, o + s, o + e, it)
        x(r, 1000, "conv2.grad_allreduce", o + 200, o + ring_end, it)
        x(r, 1000, "conv2.reduce_scatter", o + 60, o + 120, it)
doc = {"traceEvents": ev, "displayTimeUnit": "ms",
       "otherData": {"ranks": 2, "workers": 1, "first_iteration": 2, "last_iteration": 4,
                     "global_batch": 2, "model": "stub"}}
with open(sys.argv[1], "w") as f:
    json.dump(doc, f)
EOF
rm -rf "$WORK/tmp"/* "$WORK/models"
mkdir -p "$WORK/models"
STUB_TRACE="$WORK/trace-grids.json" STUB_MODELS="$WORK/models" \
  bench layer --cases resnet50-conv5 --samples 2 --grids "n2 c2 f2" --runs 2 --csv "$WORK/g.csv"
want="case,N,partition,ranks,grid,fwd_ms,bwd_ms,exposed_halo_ms,coll_ms,redist_ms,grad_ms,grad_bytes,images_per_s
resnet50-conv5,2,sample,2,n2,0.068,0.062,0.000,0.042,0.055,0.046,1200,123.4
resnet50-conv5,2,channel,2,c2,0.068,0.062,0.000,0.042,0.055,0.046,1200,123.4
resnet50-conv5,2,filter,2,f2,0.068,0.062,0.000,0.042,0.055,0.046,1200,123.4"
if [ $rc -eq 0 ] && [ "$(cat "$WORK/g.csv" 2>/dev/null)" = "$want" ]; then
  ok "canned trace --grids: collectives, redistributions, gradient allreduce, bytes (largest rank), --csv"
else
  fail "canned trace --grids: exit $rc, csv:"
  cat "$WORK/g.csv" "$WORK/out" "$WORK/err"
fi
if grep -q '^case  *N  *partition  *ranks  *grid  *fwd_ms  *bwd_ms  *exposed_halo_ms  *coll_ms  *redist_ms  *grad_ms  *grad_bytes  *images_per_s$' "$WORK/out" &&
  [ "$(grep -E '^(case|resnet50)' "$WORK/out" | awk '{ print index($0, $13) + length($13) }' | sort -u | wc -l)" -eq 1 ] &&
  [ "$(grep -cE '^\[[1-6]/6\] resnet50-conv5 N=2 (sample n2|channel c2|filter f2) run [12]: fwd .*, collectives 0.0420 ms, redistribution 0.0550 ms, gradient allreduce 0.0460 ms, 1200 gradient bytes,' "$WORK/err")" -eq 6 ]; then
  ok "table --grids: header, last column aligned, 6 progress lines"
else
  fail "table --grids: header, alignment or progress lines"
  cat "$WORK/out" "$WORK/err"
fi
# the cfgs: parallel= in the measured layer's section (the second
# [convolutional]) only
good=1
for g in n2 c2 f2; do
  got=$(awk '/^\[/ { s = $0; n[s]++ } /^parallel=/ { print s n[s] "=" $0 }' "$WORK/models/resnet50-conv5-$g.cfg" 2>/dev/null)
  [ "$got" = "[convolutional]2=parallel=$g" ] || { good=0; fail "cfg of $g: '$got'"; }
done
[ $good = 1 ] && ok "cfgs: parallel=GRID in the measured layer's section only"
# a grid starconv-train refuses (exit 2, its line): not run, tried once
rm -rf "$WORK/tmp"/*
STUB_TRACE="$WORK/trace-grids.json" STUB_REFUSE=-f2.cfg \
  bench layer --cases resnet50-conv5 --samples 2 --grids "n2 f2" --runs 2
if [ $rc -eq 0 ] && grep -q '^resnet50-conv5  *2  *filter  *2  *f2  *n/a  *n/a' "$WORK/out" &&
  grep -q '^n/a: resnet50-conv5 N=2 filter (f2): starconv-train refuses it: conv2: its 512 output channels do not split evenly' "$WORK/out" &&
  [ "$(grep -c 'filter f2 run' "$WORK/err")" -eq 1 ] && grep -q '^resnet50-conv5  *2  *sample  *2  *n2  *0.068' "$WORK/out"; then
  ok "a grid starconv-train refuses: n/a with its reason, run once, exit 0"
else
  fail "a grid starconv-train refuses: exit $rc:"
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

# --grids, one real run: resnet50-conv5 (512 -> 512 channels, 7x7) under n2
# and c2 on 2 ranks.  n2 sends the gradient of conv2's 512 x 512 x 3 x 3
# weights and 512 biases (and of the other layers, n2 under both); c2
# splits conv2's weights, with a reduce-scatter, an allgather and the
# redistributions around it.
rm -rf "$WORK/tmp"/*
SC_TEST_TIMEOUT=${SC_TEST_TIMEOUT:-120} TMPDIR="$WORK/tmp" MPIRUN="$WORK/mpirun-real" STARCONV_TRAIN="$TRAIN" \
  bash "$BENCH" layer --cases resnet50-conv5 --grids "n2 c2" --samples 2 --runs 1 --iters 3 \
  --csv "$WORK/real-grids.csv" >"$WORK/out" 2>"$WORK/err"
rc=$?
got=$(awk -F, 'NR > 1 { print $1, $2, $3, $4, $5 }' "$WORK/real-grids.csv" 2>/dev/null | tr '\n' ',')
if [ $rc -eq 0 ] && [ "$got" = "resnet50-conv5 2 sample 2 n2,resnet50-conv5 2 channel 2 c2," ]; then
  ok "real run --grids n2 c2: exit 0, a row per grid"
else
  fail "real run --grids: exit $rc, rows '$got'"
  cat "$WORK/out" "$WORK/err"
fi
bad_rows=$(awk -F, -v w=$(((512 * 512 * 9 + 512) * 4)) '
    NR == 1 { next }
    !($6 > 0 && $7 > 0 && $13 > 0 && $8 == 0) { print "times:", $0; next }
    $5 == "n2" && !($9 == 0 && $10 == 0 && $11 > 0) { print "n2 collectives:", $0 }
    $5 == "c2" && !($9 > 0 && $10 > 0 && $11 == 0) { print "c2 collectives:", $0 }
    { bytes[$5] = $12 }
    END { if (bytes["n2"] - bytes["c2"] != w) print "bytes: n2", bytes["n2"], "c2", bytes["c2"], "want a difference of", w }
  ' "$WORK/real-grids.csv" 2>/dev/null)
if [ -s "$WORK/real-grids.csv" ] && [ -z "$bad_rows" ]; then
  ok "real run --grids: times positive; n2: gradient allreduce only; c2: collectives and redistributions, no allreduce, conv2's gradient bytes fewer"
else
  fail "real run --grids:"
  printf '%s\n' "$bad_rows"
  cat "$WORK/out"
fi
finish
