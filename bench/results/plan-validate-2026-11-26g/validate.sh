#!/bin/bash
# the 16 configurations of issue 20, one after the other (commit 15f9c37);
# on 4 ranks sharing the 2 cores: 5 rounds and twice the iterations
cd "$(dirname "$0")/../../.."  # the tree
D=bench/results/plan-validate-2026-11-26g
export STARPU_SILENT=1
one() { # name net iters rounds model ranks batch log data...
  local name=$1 net=$2 i=$3 r=$4 m=$5 p=$6 b=$7 l=$8; shift 8
  local rate=""; [ $net = 1g ] && rate="--rate 1gbit"
  echo "== $name $(date +%T)"
  bench/plan-validate --model models/$m.cfg --ranks $p --batch $b --iters $i --log-every $l --rounds $r $rate \
    --calibration $D/$name.cal --out $D/$name.json "$@" > $D/$name.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
run() { # base model ranks batch iters log data...
  local n=$1 m=$2 p=$3 b=$4 i=$5 l=$6; shift 6
  if [ $p = 4 ]; then one $n shm $((2 * i)) 5 $m $p $b $l "$@"; else one $n shm $i 3 $m $p $b $l "$@"; fi
  one $n-1g 1g $i 3 $m $p $b $l "$@"
}
run lenet2 lenet 2 64 30 5
run lenet4 lenet 4 64 30 5
run wide2 wide 2 32 20 4
run wide4 wide 4 32 20 4
run mesh2 mesh128 2 8 20 4 --data synthetic-mesh:128
run mesh4 mesh128 4 8 20 4 --data synthetic-mesh:128
run r50-2 resnet50 2 4 7 2 --data synthetic:3x224x224:1000
run r50-4 resnet50 4 4 7 2 --data synthetic:3x224x224:1000
echo "all done $(date +%T)"
