#!/bin/bash
# Traces of mesh128 on 2 ranks (batch 8, 24 iterations, iterations 10-19
# traced): the planner's mix of run 33 and n2, both `layer`, at 1 Gbit/s
# (bench/slow-net) and on shared memory, alternating; ROUNDS=N pairs
# (default 2).  Output: NAME-K.json and NAME-K.log here.
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/mix-diagnosis-2026-11-28
MIX=$(python3 -c "import json;print(json.load(open('bench/results/plan-validate-2026-11-28c/mesh2-1g.json'))['planner'])")
export STARPU_SILENT=1 STARPU_NCPU=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 STARPU_WORKERS_NOBIND=1
train() { # name parallel [slow-net args]
  local n=$1 p=$2; shift 2
  "$@" mpirun --allow-run-as-root --oversubscribe -np 2 -x STARPU_SILENT -x STARPU_NCPU -x OMP_NUM_THREADS \
    -x OPENBLAS_NUM_THREADS -x STARPU_WORKERS_NOBIND ./starconv-train --model models/mesh128.cfg \
    --data synthetic-mesh:128 --batch 8 --iters 24 --log-every 24 --test off --shuffle off --parallel "$p" \
    --grad-comm layer --trace $D/$n.json --trace-iters 10:20 > $D/$n.log 2>&1
  echo "$n: $(grep -o '[0-9.]* images/s, test' $D/$n.log | cut -d' ' -f1) images/s"
}
for k in $(seq ${ROUNDS:-2}); do
  train mix-1g-$k "$MIX" bench/slow-net --rate 1gbit --
  train n2-1g-$k n2 bench/slow-net --rate 1gbit --
  train mix-shm-$k "$MIX"
done
