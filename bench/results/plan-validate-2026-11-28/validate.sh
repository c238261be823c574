#!/bin/bash
# Run 31: the configurations whose planner's choice changed with the model
# of the shared wire and the next forward over the collectives' tail
# (src/plan.c: share_wire, timeline), measured with 7 rounds of every
# strategy and the new choice, from run 30's calibrations (copied here
# first, none made again; run 29's for resnet50 on 4 ranks at 1 Gbit/s,
# which run 30 did not measure).
# Arguments: the configurations to run (e.g. mesh2-1g r50-2-1g); without,
# mesh2-1g mesh4-1g r50-2-1g.  ROUNDS=N: N rounds instead of 7.
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/plan-validate-2026-11-28
SRC=bench/results/plan-validate-2026-11-27d
ONLY="${*:-mesh2-1g mesh4-1g r50-2-1g}"
ROUNDS=${ROUNDS:-7}
export STARPU_SILENT=1
one() { # name model ranks batch iters log data...
  local n=$1 m=$2 p=$3 b=$4 i=$5 l=$6 rate=""; shift 6
  [ $p = 4 ] && [ "${n%-1g}" = "$n" ] && i=$((2 * i)) # 4 ranks on shared memory: twice the iterations, as run 29
  [ "${n%-1g}" = "$n" ] || rate="--rate 1gbit"
  [ -f $D/$n.cal ] || cp $SRC/$n.cal $D/$n.cal 2>/dev/null || cp ${SRC%d}c/$n.cal $D/$n.cal
  echo "== $n $(date +%T)"
  bench/plan-validate --model models/$m.cfg --ranks $p --batch $b --iters $i --log-every $l --rounds $ROUNDS $rate \
    --calibration $D/$n.cal --out $D/$n.json "$@" > $D/$n.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
run() { # name model ranks batch iters log data...
  if [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; then one "$@"; fi
  local n=$1; shift
  if [[ " $ONLY " == *" $n-1g "* ]]; then one $n-1g "$@"; fi
}
F=/usr/share/datasets/fashion-mnist
run lenet2 lenet 2 64 30 5 --data $F
run wide2 wide 2 32 20 4 --data $F
run mesh2 mesh128 2 8 20 4 --data synthetic-mesh:128
run r50-2 resnet50 2 4 7 2 --data synthetic:3x224x224:1000
run lenet4 lenet 4 64 30 5 --data $F
run wide4 wide 4 32 20 4 --data $F
run mesh4 mesh128 4 8 20 4 --data synthetic-mesh:128
run r50-4 resnet50 4 4 7 2 --data synthetic:3x224x224:1000
echo "all done $(date +%T)"
