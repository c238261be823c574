#!/bin/bash
# ab.sh PARALLEL [EXTRA...]: one training run of mesh128 on 2 ranks, batch 8,
# 20 iterations, inside bench/slow-net --rate 1gbit (SLOWNET="--per-rank"
# for a link and a core per rank); prints the time per iteration in ms
# (the median of the --metrics records after the first, as plan-validate).
# EXTRA: more mpirun arguments (e.g. -x OMPI_MCA_btl_tcp_eager_limit).
# Used alternating, e.g. for the planner's mix (its --parallel list from
# ../plan-validate-2026-11-28/mesh2-1g.log) against n2, 6 pairs:
#   for i in 1 2 3 4 5 6; do echo "$(./ab.sh "$MIX") $(./ab.sh n2)"; done
P=$1; shift
cd "$(dirname "$0")/../../.."  # the tree
export STARPU_SILENT=1 STARPU_NCPU=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 STARPU_WORKERS_NOBIND=1
m=$(mktemp /tmp/ab-metrics.XXXXXX)
bench/slow-net --rate 1gbit $SLOWNET -- mpirun --allow-run-as-root --oversubscribe -np 2 -x STARPU_SILENT -x STARPU_NCPU \
  -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x STARPU_WORKERS_NOBIND "$@" \
  ./starconv-train --model models/mesh128.cfg --data synthetic-mesh:128 --batch 8 --iters 20 --log-every 4 --test off \
  --shuffle off --parallel "$P" --grad-comm layer --metrics $m > /dev/null 2>&1 || { echo failed; rm -f $m; exit 1; }
python3 -c "
import json, statistics, sys
r = [json.loads(l)['images_per_s'] for l in open(sys.argv[1]) if 'images_per_s' in l]
print('%.2f' % (8000 / statistics.median(r[1:])))" $m
rm -f $m
