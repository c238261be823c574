#!/bin/bash
# Run 33: the configurations whose planner's choice the search's second
# start (the best uniform plan, refined by steepest descent) and its
# moves up to a cut point changed, 7 rounds, from the calibrations they
# were measured with before (runs 31 and 32; none made again).
# Arguments: the configurations (default: all four).  ROUNDS=N.
# BIN=DIR: the folder of starconv-train and starconv-plan (default: the tree).
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/plan-validate-2026-11-28c
ONLY="${*:-mesh2-1g mesh4-1g mesh2-800mbit r50-2-1300mbit}"
ROUNDS=${ROUNDS:-7}
BIN=${BIN:-.}
export STARPU_SILENT=1
one() { # name model ranks batch iters log-every rate source-folder data
  local n=$1 m=$2 p=$3 b=$4 i=$5 l=$6 r=$7 src=$8 data=$9
  [[ " $ONLY " == *" $n "* ]] || return 0
  [ -f $D/$n.cal ] || cp bench/results/$src/$n.cal $D/$n.cal
  echo "== $n $(date +%T)"
  bench/plan-validate --bin $BIN --model models/$m.cfg --ranks $p --batch $b --iters $i --log-every $l --rounds $ROUNDS \
    --rate $r --calibration $D/$n.cal --out $D/$n.json --data $data > $D/$n.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
one mesh2-1g mesh128 2 8 20 4 1gbit plan-validate-2026-11-28 synthetic-mesh:128
one mesh4-1g mesh128 4 8 20 4 1gbit plan-validate-2026-11-28 synthetic-mesh:128
one mesh2-800mbit mesh128 2 8 20 4 800mbit plan-validate-2026-11-28b synthetic-mesh:128
one r50-2-1300mbit resnet50 2 4 7 2 1300mbit plan-validate-2026-11-28b synthetic:3x224x224:1000
echo "all done $(date +%T)"
