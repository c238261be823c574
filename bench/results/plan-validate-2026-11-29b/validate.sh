#!/bin/bash
# Run 37: the four configurations of run 36 whose choice the search's
# --fc-replicate option changes (lenet and wide on 2 and 4 ranks at
# 1 Gbit/s), from run 36's calibrations (copied here, not made again, so
# the strategies' predictions are run 36's), as run 36 measured them.
cd "$(dirname "$0")/../../.."  # the tree
S=bench/results/plan-validate-2026-11-29
D=bench/results/plan-validate-2026-11-29b
export STARPU_SILENT=1
F=/usr/share/datasets/fashion-mnist
one() { # name model ranks batch iters log
  cp $S/$1.cal $D/$1.cal
  echo "== $1 $(date +%T)"
  bench/plan-validate --model models/$2.cfg --ranks $3 --batch $4 --iters $5 --log-every $6 --rounds 3 \
    --rate 1gbit --calibration $D/$1.cal --out $D/$1.json --data $F > $D/$1.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
one lenet2-1g lenet 2 64 30 5
one lenet4-1g lenet 4 64 30 5
one wide2-1g wide 2 32 20 4
one wide4-1g wide 4 32 20 4
echo "all done $(date +%T)"
