#!/bin/bash
# Run 32: out-of-sample checks of the planner's choice where it takes a
# mix predicted 13-16% ahead of every uniform plan (rates not measured
# before: mesh128 on 2 ranks at 800 Mbit/s, on 4 ranks at 2.5 Gbit/s,
# resnet50 on 2 ranks at 1.3 Gbit/s), and mesh128 on 2 ranks at 1 Gbit/s
# per rank (bench/slow-net --per-rank: a link and a core of its own for
# each rank).  Each calibration is run 30's at 1 Gbit/s (its kernels kept)
# with the network measured again inside slow-net at the new rate.
# Arguments: the configurations to run (default: all four).  ROUNDS=N.
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/plan-validate-2026-11-28b
SRC=bench/results/plan-validate-2026-11-27d
ONLY="${*:-mesh2-800mbit mesh4-2500mbit r50-2-1300mbit mesh2-1gbit-per-rank}"
ROUNDS=${ROUNDS:-7}
export STARPU_SILENT=1 STARPU_NCPU=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 STARPU_WORKERS_NOBIND=1
one() { # name model ranks batch iters log-every rate source-calibration data [--per-rank]
  local n=$1 m=$2 p=$3 b=$4 i=$5 l=$6 r=$7 src=$8 data=$9 pr=${10:-}
  [[ " $ONLY " == *" $n "* ]] || return 0
  echo "== $n $(date +%T)"
  if [ ! -f $D/$n.cal ]; then
    cp $SRC/$src.cal $D/$n.cal
    bench/slow-net --rate $r $pr -- mpirun --allow-run-as-root --oversubscribe -np $p -x STARPU_SILENT -x STARPU_NCPU \
      -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x STARPU_WORKERS_NOBIND \
      ./starconv-plan calibrate --model models/$m.cfg --batch $b --workers 1 --calibration $D/$n.cal --data $data \
      > /dev/null || { echo "   calibration failed"; return 1; }
  fi
  bench/plan-validate --model models/$m.cfg --ranks $p --batch $b --iters $i --log-every $l --rounds $ROUNDS --rate $r $pr \
    --calibration $D/$n.cal --out $D/$n.json --data $data > $D/$n.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
one mesh2-800mbit mesh128 2 8 20 4 800mbit mesh2-1g synthetic-mesh:128
one mesh4-2500mbit mesh128 4 8 20 4 2500mbit mesh4-1g synthetic-mesh:128
one r50-2-1300mbit resnet50 2 4 7 2 1300mbit r50-2-1g synthetic:3x224x224:1000
one mesh2-1gbit-per-rank mesh128 2 8 20 4 1gbit mesh2-1g synthetic-mesh:128 --per-rank
echo "all done $(date +%T)"
