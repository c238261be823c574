# Training on a GPU gives the weights of training on CPUs: lenet, 5
# iterations, one CUDA worker beside one CPU worker (StarPU places the
# tasks), against CPU workers only; and on 2 ranks with the gradient sums
# by StarPU-MPI tasks and by NCCL (--collectives nccl; only with 2 GPUs or
# more, said on stdout otherwise).  Skipped (77) without the CUDA codelets
# or without a GPU.
. "$TOP_SRCDIR/tests/common.sh"

if ! grep -q '^#define SC_USE_CUDA 1' "$TOP_BUILDDIR/config.h" 2>/dev/null; then
  echo "SKIP: built without the CUDA codelets (./configure --with-cuda; docs/gpu.md)"
  exit 77
fi
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "SKIP: no GPU (/dev/nvidia*) on this machine"
  exit 77
fi

# Relative tolerance: cuDNN's algorithms sum in other orders than oneDNN's.
RTOL=1e-4
args="--model $MODELS/lenet.cfg --batch 32 --iters 5 --shuffle off --test off"

STARPU_NCUDA=0 run 1 1 $args --save "$WORK/cpu.st" >"$WORK/cpu.out" 2>&1 || {
  cat "$WORK/cpu.out"
  fail "CPU run"
}

# vs_cpu NAME FILE NP ARGS...: lenet on NP ranks with the extra ARGS (and
# the caller's environment) matches the CPU run above.
vs_cpu() {
  name=$1 file=$2 np=$3
  shift 3
  if ! run "$np" 1 $args "$@" --save "$WORK/$file.st" >"$WORK/$file.out" 2>&1; then
    cat "$WORK/$file.out"
    fail "$name: the run failed"
  elif out=$("$COMPARE" "$WORK/$file.st" "$WORK/cpu.st" $RTOL momentum=1e-3); then
    ok "$name: $out"
  else
    echo "$out"
    fail "$name"
  fi
}

STARPU_NCUDA=1 STARPU_SCHED=dmda vs_cpu "1 rank, CUDA + CPU worker vs CPU" gpu 1
# cuDNN limited to algorithms without workspace (the scratch handle is 4
# bytes then).
SC_CUDNN_WORKSPACE_MB=0 STARPU_NCUDA=1 STARPU_SCHED=dmda vs_cpu "1 rank, no cuDNN workspace, vs CPU" gpu0 1

# GPUs the ranks can use: nvidia-smi's list where there is one, else the
# device files, at most as many as CUDA_VISIBLE_DEVICES names.
ngpus=$(ls -d /dev/nvidia[0-9]* 2>/dev/null | wc -l)
if command -v nvidia-smi >/dev/null 2>&1 && n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') && [ "$n" -gt 0 ]; then
  ngpus=$n
fi
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
  n=$(printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
  [ "$n" -lt "$ngpus" ] && ngpus=$n
fi

# 2 ranks, tasks vs NCCL collectives, with a replicated fc1 (its inputs
# and errors allgathered) and the --nonfinite skip gate (its count summed),
# so that every NCCL collective runs.  tasks: both ranks on one GPU
# (STARPU_NCUDA=1 takes device 0), as on a test machine.  nccl: NCCL
# refuses two ranks on one GPU ("Duplicate GPU detected"), so it needs two,
# and leaves the CUDA workers to the default, which gives each local rank
# a GPU of its own (src/runtime/runtime.c).
for coll in tasks nccl; do
  if [ $coll = nccl ] && [ "$ngpus" -lt 2 ]; then
    echo "skipped: 2 ranks with GPUs, --collectives nccl: $ngpus GPU here, and NCCL needs one GPU per rank"
    continue
  fi
  # A subshell for the environment; its verdict comes back as its status.
  (
    before=$failures
    if [ $coll = nccl ]; then
      unset STARPU_NCUDA STARPU_WORKERS_CUDAID
    else
      export STARPU_NCUDA=1
    fi
    STARPU_SCHED=dmda vs_cpu "2 ranks with GPUs, --collectives $coll vs 1 CPU rank" $coll 2 \
      --fc-replicate 1 --nonfinite skip --collectives $coll
    [ "$failures" -eq "$before" ]
  ) || failures=$((failures + 1))
done
finish
