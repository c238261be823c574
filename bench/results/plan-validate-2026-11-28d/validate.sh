#!/bin/bash
# Run 34: the two Spearman misses of runs 30-33, wide and mesh128 on 4
# ranks sharing 2 cores (shared memory), measured again with twice run
# 30's iterations per run (80), 7 rounds, from run 30's calibrations
# (copied here first, none made again): is their order's noise (rounds
# against each other: median 0.63 and 0.83 in run 30) shorter runs'?
# Arguments: the configurations (default: both).  ROUNDS=N.
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/plan-validate-2026-11-28d
SRC=bench/results/plan-validate-2026-11-27d
ONLY="${*:-wide4 mesh4}"
ROUNDS=${ROUNDS:-7}
export STARPU_SILENT=1
one() { # name model batch iters log-every data
  local n=$1 m=$2 b=$3 i=$4 l=$5 data=$6
  [[ " $ONLY " == *" $n "* ]] || return 0
  [ -f $D/$n.cal ] || cp $SRC/$n.cal $D/$n.cal
  echo "== $n $(date +%T)"
  bench/plan-validate --model models/$m.cfg --ranks 4 --batch $b --iters $i --log-every $l --rounds $ROUNDS \
    --calibration $D/$n.cal --out $D/$n.json --data $data > $D/$n.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
one mesh4 mesh128 8 80 20 synthetic-mesh:128
one wide4 wide 32 80 20 /usr/share/datasets/fashion-mnist
echo "all done $(date +%T)"
