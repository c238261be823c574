# Bad input: a one-line error naming what and where, exit status 2, no
# crash, hang or partial file.
. "$TOP_SRCDIR/tests/common.sh"

# expect NAME PATTERN NP ARGS...: exit status 2, the pattern in the error
# line, and no checkpoint written.
expect() {
  name=$1 pattern=$2 np=$3
  shift 3
  rm -f "$WORK/out.safetensors"
  STARPU_NCPU=1 "$MPIRUN" "$np" "$TRAIN" --save "$WORK/out.safetensors" "$@" >"$WORK/stdout" 2>"$WORK/stderr"
  rc=$?
  line=$(grep '^starconv-train: ' "$WORK/stderr")
  nlines=$(printf '%s\n' "$line" | grep -c .)
  if [ $rc -eq 2 ] && [ "$nlines" -eq 1 ] && printf '%s\n' "$line" | grep -q -- "$pattern" &&
    [ ! -e "$WORK/out.safetensors" ]; then
    ok "$name: $line"
  else
    fail "$name: status $rc (want 2), error lines: $nlines, want /$pattern/"
    cat "$WORK/stderr"
  fi
}

cfg() { printf '%s\n' "$@" >"$WORK/m.cfg"; }
net='[net]
channels=1
height=28
width=28'
good_tail='[connected]
output=10
[softmax]'

m="--model $WORK/m.cfg --data $DATA --iters 1"
expect "unknown option" "unknown option '--bogus'" 1 --bogus
expect "bad number option" "--batch: 'abc'" 1 --batch abc
expect "bad on/off" "--shuffle: 'maybe'" 1 --shuffle maybe
expect "lr schedule name" "--lr-schedule linear: constant, step" 1 --lr-schedule linear
expect "step milestones" "--lr-schedule step:5,3: milestones must increase" 1 --lr-schedule step:5,3
expect "step gamma" "--lr-schedule step:5:-1: GAMMA" 1 --lr-schedule step:5:-1
expect "cosine minimum" "--lr-schedule cosine:x: cosine" 1 --lr-schedule cosine:x
expect "warm-up factor" "--warmup 3:0: W" 1 --warmup 3:0
expect "warm-up past a cosine run" "--warmup 10: a cosine schedule needs a run longer" 1 \
  --data "$DATA" --lr-schedule cosine --warmup 10 --iters 5 --test off
expect "missing cfg" "nope.cfg" 1 --model "$WORK/nope.cfg" --data "$DATA"
cfg "$net" '[convolutional]' 'filters=4' 'size=3' '[dropout]' "$good_tail"
expect "unknown section" "m.cfg:8: unknown section \[dropout\]" 1 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=3' 'colour=blue' "$good_tail"
expect "unknown key" "m.cfg:8: unknown key .colour." 1 $m
cfg "$net" '[convolutional]' 'filters=four' 'size=3' "$good_tail"
expect "bad number" "m.cfg:6: bad number 'four'" 1 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=31' "$good_tail"
expect "kernel larger than input" "m.cfg:5: .convolutional. kernel 31 does not fit" 1 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=3' '[connected]' 'output=7' '[softmax]'
expect "classes mismatch" "classes=10" 1 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=3' 'activation=tanh' "$good_tail"
expect "unknown activation" "tanh" 1 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=3' 'bias=2' "$good_tail"
expect "conv bias=2" "m.cfg:8: bias=2 out of range \[0, 1\] in \[convolutional\]" 1 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=3' 'bias=no' "$good_tail"
expect "conv bias=no" "m.cfg:8: bad number 'no' for 'bias'" 1 $m

L="--model $MODELS/lenet.cfg --iters 1"
expect "missing data dir" "dataset-fashion-mnist" 1 $L --data "$WORK/nodata"
mkdir -p "$WORK/bad"
cp "$DATA"/t10k-* "$WORK/bad/"
for f in "$DATA"/train-*; do head -c 5000 "$f" >"$WORK/bad/$(basename "$f")"; done
expect "truncated data file" "train-images" 1 $L --data "$WORK/bad"
expect "batch not divisible by the ranks" "does not split evenly over 2 ranks" 2 $L --data "$DATA" --batch 5
expect "accumulate 0" "--accumulate: '0' is not an integer in \[1, 4096\]" 1 $L --data "$DATA" --accumulate 0
expect "accumulate past 4096" "--accumulate: '4097' is not an integer in \[1, 4096\]" 1 $L --data "$DATA" \
  --accumulate 4097
expect "optimizer name" "--optimizer: 'lamb' is not sgd, adam or adamw" 1 $L --data "$DATA" --optimizer lamb
expect "amsgrad refused" "--optimizer amsgrad: AMSGrad is not supported" 1 $L --data "$DATA" --optimizer amsgrad
expect "momentum with adam" "--momentum is SGD's: --optimizer adam takes --betas" 1 $L --data "$DATA" \
  --optimizer adam --momentum 0.5
expect "betas with sgd" "--betas and --eps are Adam's" 1 $L --data "$DATA" --betas 0.9,0.99
expect "betas one number" "--betas: '0.9' is not two numbers B1,B2" 1 $L --data "$DATA" --optimizer adam --betas 0.9
expect "betas of 1" "--betas 0.9,1: beta 2 is 1, not in \[0, 1)" 1 $L --data "$DATA" --optimizer adamw --betas 0.9,1
expect "betas three" "--betas: '0.9,0.99,0.5' is not two numbers" 1 $L --data "$DATA" --optimizer adam \
  --betas 0.9,0.99,0.5
expect "eps negative" "--eps: '-1e-8' is not a number >= 0" 1 $L --data "$DATA" --optimizer adam --eps -1e-8
expect "accumulate not a number" "--accumulate: 'four'" 1 $L --data "$DATA" --accumulate four
expect "batch x accumulate past the data" "--batch 20000 x --accumulate 4 is more than the 60000 training" 1 \
  $L --data "$DATA" --batch 20000 --accumulate 4 --test off
expect "accumulate with skip over batch normalization" "--accumulate 2 with --nonfinite skip: layer .* keeps running" \
  1 --model "$TOP_SRCDIR/tests/models/bn.cfg" --iters 1 --data "$DATA" --accumulate 2 --nonfinite skip
expect "unknown scheduler" "unknown scheduling policy 'fastest'.*valid:.*eager" 1 $L --data "$DATA" --sched fastest
STARPU_SCHED=fastest expect "unknown scheduler in STARPU_SCHED" "unknown scheduling policy 'fastest' in STARPU_SCHED" \
  1 $L --data "$DATA"
printf 'not a checkpoint at all' >"$WORK/garbage.safetensors"
expect "garbage checkpoint" "garbage.safetensors" 1 $L --data "$DATA" --load "$WORK/garbage.safetensors"
expect "missing checkpoint" "absent.safetensors" 1 $L --data "$DATA" --load "$WORK/absent.safetensors"
STARPU_NCPU=1 "$MPIRUN" 1 "$TRAIN" --model "$MODELS/wide.cfg" --data "$DATA" --iters 0 --test off \
  --save "$WORK/wide.safetensors" >/dev/null 2>&1 || fail "saving a wide checkpoint"
expect "checkpoint of another model" "another model" 1 $L --data "$DATA" --load "$WORK/wide.safetensors"
expect "unwritable save path" "not writable" 1 $L --data "$DATA" --save /nonexistent/dir/x.safetensors
expect "unknown grad-comm" "--grad-comm 'ring'.*layer, chunks:K, bucket:MB or end" 1 $L --data "$DATA" --grad-comm ring
expect "chunks without K" "chunks:K must be a positive integer" 1 $L --data "$DATA" --grad-comm chunks:
expect "chunks:0" "chunks:K must be a positive integer" 1 $L --data "$DATA" --grad-comm chunks:0
expect "negative bucket" "bucket:MB must be a positive number" 1 $L --data "$DATA" --grad-comm bucket:-2
expect "bad fc-replicate" "--fc-replicate: 'two'" 1 $L --data "$DATA" --fc-replicate two
expect "bad comm-window" "--comm-window: 'x'" 1 $L --data "$DATA" --comm-window x
expect "tiny comm-segment" "--comm-segment: '2' is neither auto nor an integer in \[4," 1 $L --data "$DATA" --comm-segment 2
expect "reversed trace range" "--trace-iters: '5:2'" 1 $L --data "$DATA" --trace-iters 5:2
expect "trace range past the run" "--trace-iters 1:9: the run has 1 iterations" 1 $L --data "$DATA" --trace-iters 1:9 --report
expect "unwritable trace path" "--trace /nonexistent/dir/t.json: the directory is not writable" 1 $L --data "$DATA" \
  --trace /nonexistent/dir/t.json
expect "bad grid letter" "grid 'x2': 'x' is not a dimension" 1 $L --data "$DATA" --parallel x2
expect "grid without extent" "'h' needs an extent" 1 $L --data "$DATA" --parallel h
# channel and filter splitting
W="--model $TOP_SRCDIR/tests/models/wide_small.cfg --data $DATA --iters 1 --batch 6"
cfg "$net" '[convolutional]' 'filters=4' 'size=3' '[convolutional]' 'parallel=c3' 'filters=6' 'size=3' "$good_tail"
expect "channels that do not split evenly" "conv2: its 4 input channels do not split evenly into 3 parts" 3 $m \
  --batch 6
expect "filters that do not split evenly" "conv1: its 16 output channels do not split evenly into 3 parts" 3 $W \
  --parallel f3
cfg "$net" '[convolutional]' 'filters=4' 'size=3' '[connected]' 'parallel=c2' 'output=10' '[softmax]'
expect "channels of a fully connected layer" "fc1: parallel=c2: a .connected. layer cannot split its channels" 2 $m
cfg "$net" '[convolutional]' 'parallel=c2' 'filters=4' 'size=3' "$good_tail"
expect "the image's one channel" "conv1: the first layer cannot split its input channels" 2 $m
cfg "$net" '[convolutional]' 'filters=4' 'size=3' '[convolutional]' 'parallel=c2' 'filters=5' 'size=3' "$good_tail"
expect "uneven output channels" "conv2: its 5 output channels do not split evenly into 2 parts" 2 $m
expect "bad synthetic spec" "expected synthetic:CxHxW:K" 1 $L --data synthetic:3x28:10
expect "bad mesh size" "expected synthetic-mesh:SIZE" 1 $L --data synthetic-mesh:big
expect "synthetic data of the wrong shape" "samples are 3x32x32 but the model's input is 1x28x28" 1 $L --data synthetic:3x32x32:10
expect "bad --mem-limit" "--mem-limit: 'lots'" 1 $L --data "$DATA" --mem-limit lots
expect "bad --collectives" "--collectives: 'mpi' is neither tasks nor nccl" 1 $L --data "$DATA" --collectives mpi
expect "bad --layouts" "--layouts: 'nhwc' is neither blocked nor nchw" 1 $L --data "$DATA" --layouts nhwc
expect "bad --denormals" "--denormals: 'zero' is neither keep nor flush" 1 $L --data "$DATA" --denormals zero
expect "bad --precision" "--precision: 'fp16' is neither fp32 nor bf16" 1 $L --data "$DATA" --precision fp16
expect "bad --grad-dtype" "--grad-dtype: 'fp16' is neither fp32 nor bf16" 1 $L --data "$DATA" --grad-dtype fp16
expect "--grad-dtype bf16 with NCCL" "--grad-dtype bf16: not with --collectives nccl" 2 $L --data "$DATA" \
  --grad-dtype bf16 --collectives nccl
# Without a GPU (or NCCL) here, asking for NCCL is a clear error, not a hang.
expect "--collectives nccl without NCCL or a CUDA worker" \
  "--collectives nccl: \(starconv was built without NCCL\|this rank has no CUDA worker\)" 2 $L --data "$DATA" \
  --collectives nccl
# One rank has nothing to sum, but the same command line is refused alike.
expect "--collectives nccl on one rank without NCCL or a CUDA worker" \
  "--collectives nccl: \(starconv was built without NCCL\|this rank has no CUDA worker\)" 1 $L --data "$DATA" \
  --collectives nccl
# lenet has two [connected] layers: a third to replicate is a mistake, on any
# number of ranks, and with --parallel auto (the plan is made before setup).
for np in 1 2; do
  expect "--fc-replicate above the [connected] layers, $np rank(s)" \
    "--fc-replicate 3: the model has 2 \[connected\] layers with parameters" $np $L --data "$DATA" --fc-replicate 3
done
# NCCL with a spatial grid is refused before any NCCL call, GPU or not.
expect "--collectives nccl with a spatial grid" \
  "--collectives nccl: layer conv1 is split as h2; NCCL takes only sample parallelism" 2 $L --data "$DATA" \
  --parallel h2 --collectives nccl
# The cuDNN workspace limit is checked in the CUDA build, GPU or not.
if grep -q '^#define SC_USE_CUDA 1' "$TOP_BUILDDIR/config.h" 2>/dev/null; then
  export SC_CUDNN_WORKSPACE_MB=64x
  expect "bad SC_CUDNN_WORKSPACE_MB" "SC_CUDNN_WORKSPACE_MB: '64x' is not a size in MiB" 1 $L --data "$DATA"
  unset SC_CUDNN_WORKSPACE_MB
fi
cfg "$net" '[convolutional]' 'filters=10' 'size=1' '[softmax]' 'per_pixel=1'
expect "per-pixel loss on image data" "needs per-pixel labels" 1 --model "$WORK/m.cfg" --data "$DATA" --iters 1
# starconv-plan --machine: a bad machine description gets one line that
# names its file and line, exit status 2, and nothing on stdout.
expect_plan() {
  name=$1 pattern=$2
  shift 2
  "$TOP_BUILDDIR/starconv-plan" "$@" >"$WORK/stdout" 2>"$WORK/stderr"
  rc=$?
  nlines=$(grep -c . "$WORK/stderr")
  if [ $rc -eq 2 ] && [ "$nlines" -eq 1 ] && grep -q -- "$pattern" "$WORK/stderr" && [ ! -s "$WORK/stdout" ]; then
    ok "$name: $(cat "$WORK/stderr")"
  else
    fail "$name: status $rc (want 2), error lines: $nlines, want /$pattern/"
    cat "$WORK/stderr"
  fi
}
printf '%s\n' 'starconv-machine 1' 'ranks-per-node 4' 'intra-node 5e-6 fast' >"$WORK/machine.txt"
expect_plan "malformed machine line" "^starconv-plan: $WORK/machine.txt:3: 'intra-node': 'fast' is not a number" \
  --machine "$WORK/machine.txt" --model "$MODELS/lenet.cfg"
printf '%s\n' 'starconv-machine 1' 'ranks-per-node 4' 'intra-node 5e-6 32e9' 'inter-node 1e-5 25e9' 'task 1e-5' \
  'calibration gpu-times.txt  # made elsewhere' >"$WORK/machine.txt"
expect_plan "machine file naming a missing calibration" \
  "^starconv-plan: $WORK/machine.txt:6: calibration gpu-times.txt: cannot read calibration $WORK/gpu-times.txt" \
  --machine "$WORK/machine.txt" --model "$MODELS/lenet.cfg"
# calibrate --device: a bad value, outside calibrate, cuda in a CPU build,
# cuda with --data (loading runs on CPU workers); no calibration written.
expect_plan "--device gpu" "^starconv-plan: --device: 'gpu' is neither cpu nor cuda" \
  calibrate --device gpu --model "$MODELS/lenet.cfg" --calibration "$WORK/dev.cal"
expect_plan "--device outside calibrate" "^starconv-plan: --device is an option of calibrate" \
  --device cpu --model "$MODELS/lenet.cfg" --ranks 2
expect_plan "--device cuda with --data" "^starconv-plan: --data with --device cuda: data loading runs on CPU" \
  calibrate --device cuda --data "$DATA" --model "$MODELS/lenet.cfg" --calibration "$WORK/dev.cal"
if ! grep -q '^#define SC_USE_CUDA 1' "$TOP_BUILDDIR/config.h" 2>/dev/null; then
  expect_plan "--device cuda in a CPU build" "^starconv-plan: --device cuda: this starconv was built without CUDA" \
    calibrate --device cuda --model "$MODELS/lenet.cfg" --calibration "$WORK/dev.cal"
fi
expect_plan "starconv-plan bad --grad-dtype" "^starconv-plan: --grad-dtype: 'half' is neither fp32 nor bf16" \
  --grad-dtype half --model "$MODELS/lenet.cfg" --ranks 2
expect_plan "--grad-dtype bf16 with calibrate" "^starconv-plan: --grad-dtype bf16 is an option of a plan on this machine" \
  calibrate --grad-dtype bf16 --model "$MODELS/lenet.cfg" --calibration "$WORK/dev.cal"
if [ -e "$WORK/dev.cal" ]; then fail "a refused calibrate wrote $WORK/dev.cal"; else ok "no calibration written"; fi
if [ "$("$TRAIN" --list-sched | wc -l)" -eq 1 ] && "$TRAIN" --list-sched | grep -qw lws &&
  "$TRAIN" --list-sched | grep -qw dmda; then
  ok "--list-sched prints the policy names"
else
  fail "--list-sched"
fi
finish
