# bench/sc-conv-ceiling: its refusals, and the FLOPs it counts for one
# convolution (2 x multiply-adds x 3 directions) and for a model (its first
# layer without backward data), checked against sums made here; and that
# starconv-train names the same oneDNN implementation at start-up.
. "$TOP_SRCDIR/tests/common.sh"
CEIL="$TOP_BUILDDIR/bench/sc-conv-ceiling"
[ -x "$CEIL" ] || { fail "no $CEIL (make builds it)"; finish; }
export OMP_NUM_THREADS=1

for bad in "--shape 1,2,3" "--shape 2,4,8,8,4,9,1,0" "--model vgg" "--reps 0" "--batch" "--frobnicate 1"; do
  "$CEIL" $bad >"$WORK/out" 2>"$WORK/err"
  rc=$?
  [ $rc -eq 2 ] || fail "sc-conv-ceiling $bad: exit $rc, want 2"
  [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "sc-conv-ceiling $bad: want one line on stderr, got: $(cat "$WORK/err")"
done

# 2 samples of 4 x 8 x 8, 6 filters 3 x 3, stride 1, pad 1: 2*6*8*8*4*9
# multiply-adds, x 2 FLOPs, x 3 directions.
"$CEIL" --reps 1 --shape 2,4,8,8,6,3,1,1 >"$WORK/out" 2>"$WORK/err" || fail "sc-conv-ceiling --shape: $(cat "$WORK/err")"
want=$(awk 'BEGIN { printf "%.3f", 2*6*8*8*4*9 * 2 * 3 * 1e-9 }')
got=$(awk '/^all:/ { print $2 }' "$WORK/out")
[ "$got" = "$want" ] || fail "--shape 2,4,8,8,6,3,1,1: $got GFLOP, want $want"

# lenet at 4 samples: conv1 (1->32, 3x3, pad 1, 28x28) forward and
# backward weights only, conv2 (32->64, 3x3, pad 1, 14x14) all three.
"$CEIL" --reps 1 --model lenet --batch 4 --peak 100 >"$WORK/out" 2>"$WORK/err" || fail "--model lenet: $(cat "$WORK/err")"
want=$(awk 'BEGIN { printf "%.3f", (4*32*28*28*1*9 * 2 * 2 + 4*64*14*14*32*9 * 2 * 3) * 1e-9 }')
got=$(awk '/^all:/ { print $2 }' "$WORK/out")
[ "$got" = "$want" ] || fail "--model lenet: $got GFLOP, want $want"
grep -q "% of 100.0" "$WORK/out" || fail "--peak 100: no fraction of it in: $(tail -n 1 "$WORK/out")"
# starconv-train's setup line names the implementation of its largest
# convolution (lenet's conv2 at 4 samples), the one this tool
# reports for that shape.
impl=$(awk '$1 == "4,32,14,14,64,3,1,1" { print $NF }' "$WORK/out")
STARPU_NCPU=1 "$MPIRUN" 1 "$TRAIN" --data "$DATA" --model "$MODELS/lenet.cfg" --batch 4 --iters 1 --test off \
  >"$WORK/train.out" 2>&1 || fail "starconv-train lenet: $(tail -n 2 "$WORK/train.out")"
grep -q "; convolutions on CPU: oneDNN $impl\$" "$WORK/train.out" ||
  fail "the setup line does not name oneDNN $impl: $(grep parameters "$WORK/train.out")"

# No convolution runs oneDNN's reference implementation, which it picks
# for some shapes on the blocked layouts (mesh128's 128-channel 2x2
# layers' weight gradient, 300 times slower than its JIT kernel on
# layouts of its own).
ONEDNN_VERBOSE=1 STARPU_NCPU=1 "$MPIRUN" 1 "$TRAIN" --data synthetic-mesh:128 --model "$MODELS/mesh128.cfg" --batch 2 \
  --iters 2 --test off >"$WORK/verbose.out" 2>&1 || fail "starconv-train mesh128: $(tail -n 2 "$WORK/verbose.out")"
grep -q "exec,cpu,convolution,jit" "$WORK/verbose.out" || fail "ONEDNN_VERBOSE=1 printed no convolution"
refs=$(grep "exec,cpu,convolution,ref" "$WORK/verbose.out" | cut -d, -f4-7 | sort -u)
[ -z "$refs" ] || fail "convolutions in oneDNN's reference implementation: $refs"

[ "$failures" -eq 0 ] && ok "sc-conv-ceiling: refusals and FLOP counts; no convolution in oneDNN's reference implementation"
finish
