# The calibration times kernels as training runs them: lenet's
# convolutions and first fully connected layer, calibrated on 1 rank and
# 1 worker, against the same kernels' tasks in a traced training run with
# the same tile (batch 16).  A calibrated time more than LIMIT (10) times the
# trained one fails (the calibration's inputs were denormal floats once,
# which some CPUs compute two orders of magnitude slower: its plans were
# then tens of times off).  Training's side is the median over 8 traced
# iterations; the limit leaves room for a loaded machine's noise.
. "$TOP_SRCDIR/tests/common.sh"

PLAN="$TOP_BUILDDIR/starconv-plan"
LENET="$MODELS/lenet.cfg"
LIMIT=10
CAL=${SC_TEST_CALIBRATION:-$WORK/cal.txt} # a given one: only the comparison

if [ -z "${SC_TEST_CALIBRATION:-}" ] &&
  ! STARPU_NCPU=1 "$MPIRUN" 1 "$PLAN" calibrate --model "$LENET" --batch 16 --reps 3 --calibration "$CAL" \
    >"$WORK/cal.log" 2>&1; then
  fail "calibrate: $(tail -1 "$WORK/cal.log")"
  finish
fi
if ! run 1 1 --model "$LENET" --batch 16 --iters 12 --test off --shuffle off --seed 3 \
  --trace "$WORK/trace.json" --trace-iters 5:12 >"$WORK/train.log" 2>&1; then
  fail "traced training: $(tail -1 "$WORK/train.log")"
  finish
fi

# layer kind phase column key: the calibration's line for the layer's tile
# and the column of the phase (fwd 2, bwd_data 3, bwd_filter 4).
compare=$(/usr/bin/python3 - "$WORK/trace.json" "$CAL" "$LIMIT" <<'PY'
import json, statistics, sys
trace, cal, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
keys = {
    "conv1": "conv n=16 c=1 h=28 w=28 f=32 k=3x3 s=1x1 p=1x1 o=28x28",
    "conv2": "conv n=16 c=32 h=14 w=14 f=64 k=3x3 s=1x1 p=1x1 o=14x14",
    "fc1": "fc n=16 in=3136 out=128",
}
phases = {"fwd": 0, "bwd_data": 1, "bwd_filter": 2, "bwd_weights": 2}
calib = {}
for line in open(cal):
    f = line.split()
    if f and f[0] == "kernel":
        calib[" ".join(f[4:])] = [float(x) for x in f[1:4]]
durs = {}
for e in json.load(open(trace))["traceEvents"]:
    if e.get("ph") == "X" and "." in e["name"]:
        durs.setdefault(e["name"], []).append(e["dur"] * 1e-6)
checked = bad = 0
for layer, key in keys.items():
    if key not in calib:
        print("FAIL the calibration has no kernel '%s'" % key)
        bad += 1
        continue
    for phase, col in phases.items():
        d = durs.get(layer + "." + phase)
        if not d or (layer == "conv1" and phase == "bwd_data"):
            continue
        t = statistics.median(d)
        c = calib[key][col]
        ratio = c / t
        checked += 1
        verdict = "ok" if ratio <= limit else "FAIL"
        bad += verdict == "FAIL"
        print("%s %s.%s: calibrated %.3f ms, trained %.3f ms, ratio %.2f (limit %g)"
              % (verdict, layer, phase, c * 1e3, t * 1e3, ratio, limit))
if checked < 7:
    print("FAIL only %d kernels compared (want 7)" % checked)
    bad += 1
sys.exit(1 if bad else 0)
PY
)
status=$?
printf '%s\n' "$compare"
[ $status -eq 0 ] || failures=$((failures + 1))
finish
