#!/bin/bash
# the 16 configurations of issue 20 (commit 4e97497) on a machine the model had not seen
# (AVX2, no AVX-512), calibrated here from nothing: each shared-memory run
# calibrates (plan-validate does when --calibration is absent), and its
# 1 Gbit/s twin starts from a copy of that calibration with the network
# measured again inside slow-net (--recalibrate); otherwise as 26g.
# Arguments: the configurations to run (e.g. r50-4), all without.
# RESULTS=DIR: write to DIR instead of here (run 28's validate.sh).
cd "$(dirname "$0")/../../.."  # the tree
D=${RESULTS:-bench/results/plan-validate-2026-11-27}
ONLY="$*"
export STARPU_SILENT=1
one() { # name net iters rounds model ranks batch log data...
  local name=$1 net=$2 i=$3 r=$4 m=$5 p=$6 b=$7 l=$8; shift 8
  local rate=""
  if [ $net = 1g ]; then rate="--rate 1gbit --recalibrate"; cp $D/${name%-1g}.cal $D/$name.cal; fi
  echo "== $name $(date +%T)"
  bench/plan-validate --model models/$m.cfg --ranks $p --batch $b --iters $i --log-every $l --rounds $r $rate \
    --calibration $D/$name.cal --out $D/$name.json "$@" > $D/$name.log 2>&1 </dev/null
  echo "   rc=$? $(date +%T)"
}
run() { # base model ranks batch iters log data...
  local n=$1 m=$2 p=$3 b=$4 i=$5 l=$6; shift 6
  [ -z "$ONLY" ] || [[ " $ONLY " == *" $n "* ]] || return 0
  if [ $p = 4 ]; then one $n shm $((2 * i)) 5 $m $p $b $l "$@"; else one $n shm $i 3 $m $p $b $l "$@"; fi
  one $n-1g 1g $i 3 $m $p $b $l "$@"
}
F=/usr/share/datasets/fashion-mnist
run lenet2 lenet 2 64 30 5 --data $F
run lenet4 lenet 4 64 30 5 --data $F
run wide2 wide 2 32 20 4 --data $F
run wide4 wide 4 32 20 4 --data $F
run mesh2 mesh128 2 8 20 4 --data synthetic-mesh:128
run mesh4 mesh128 4 8 20 4 --data synthetic-mesh:128
run r50-2 resnet50 2 4 7 2 --data synthetic:3x224x224:1000
run r50-4 resnet50 4 4 7 2 --data synthetic:3x224x224:1000
echo "all done $(date +%T)"
