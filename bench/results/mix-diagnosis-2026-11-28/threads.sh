#!/bin/bash
# threads.sh NAME PARALLEL: mesh128 on 2 ranks at 1 Gbit/s (batch 8, 150
# iterations, `layer`), and the CPU each thread of each rank used over 3 s
# of it from 5 s in (/proc: user + system time), as a share of one core.
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/mix-diagnosis-2026-11-28 N=$1 P=$2
export STARPU_SILENT=1 STARPU_NCPU=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 STARPU_WORKERS_NOBIND=1
bench/slow-net --rate 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 2 -x STARPU_SILENT -x STARPU_NCPU \
  -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x STARPU_WORKERS_NOBIND ./starconv-train --model models/mesh128.cfg \
  --data synthetic-mesh:128 --batch 8 --iters 150 --log-every 50 --test off --shuffle off --parallel "$P" \
  --grad-comm layer > $D/$N.log 2>&1 &
snap() {
  for p in $(pgrep -f "^./starconv-train --model models/mesh128.cfg"); do
    for t in /proc/$p/task/*; do echo "$p/${t##*/}/$(cat $t/comm | tr ' ' _) $(awk '{print $14 + $15}' $t/stat)"; done
  done | sort
}
sleep 5; a=$(snap); sleep 3; b=$(snap); wait
hz=$(getconf CLK_TCK)
join -j1 <(echo "$a") <(echo "$b") |
  awk -v hz=$hz '{split($1, k, "/"); printf "  pid %s %-16s %5.1f%% of a core\n", k[1], k[3], ($3 - $2) / hz / 3 * 100}'
echo "  $(grep -o '[0-9.]* images/s, test' $D/$N.log | cut -d' ' -f1) images/s"
