# --optimizer adam and adamw.  (a) From one initial checkpoint, 5
# iterations of lenet (lr 1e-3; adamw with --weight-decay 0.05) on 1 rank,
# 2 ranks (sample parallelism) and 2 ranks split spatially (--parallel
# h2) give the weights, exp_avg, exp_avg_sq and step that
# torch.optim.Adam / AdamW (foreach=False) give on the same samples in the
# same order, within 1e-5 relative (skipped without Debian's
# python3-torch); (b) every strategy on 2 ranks (--grad-comm layer, end,
# bucket:1, --fc-replicate 1, h2, a channel split c2, the small vectors'
# direct collectives (the state on rank 0 only), --accumulate 2) ends
# within 1e-5 of 1 rank, Adam's state included; (c) a run stopped after 2 iterations and resumed ends on
# the bytes of an uninterrupted one (1 rank, 2 ranks, adamw), and a
# checkpoint saved on 2 ranks resumes on 1 within 1e-5 of the
# uninterrupted 2-rank run (the sums' order differs after the change), and
# in PyTorch (sc_torch's loader into AdamW's state_dict(), step 2) within
# 1e-5 of it; a --resume under another optimizer is refused; (d) --report-memory: each of
# 2 ranks holds about half of 1 rank's optimizer state; (e) --nonfinite
# skip with a NaN in iteration 3: the iteration is skipped whole (3
# iterations end where 2 end, bit for bit, step count included).
. "$TOP_SRCDIR/tests/common.sh"

PY=/usr/bin/python3
CHECK="$TOP_SRCDIR/bench/torch_check.py"
LENET="--model $MODELS/lenet.cfg --batch 32 --lr 1e-3 --shuffle off --seed 3 --test off"
WD_adam="" WD_adamw="--weight-decay 0.05"

# (a) PyTorch's replay
if [ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  for opt in adam adamw; do
    eval wd=\$WD_$opt
    run 1 1 $LENET --optimizer $opt $wd --iters 0 --save "$WORK/init-$opt.st" >/dev/null 2>&1 ||
      fail "$opt: initial checkpoint"
    for layout in "1" "2" "2 --parallel h2"; do
      np=${layout%% *}
      run $np 1 $LENET --optimizer $opt $wd --iters 5 ${layout#"$np"} --save "$WORK/t.st" >/dev/null 2>&1 ||
        { fail "$opt on $layout: 5 iterations"; continue; }
      if "$PY" "$CHECK" --model "$MODELS/lenet.cfg" --init "$WORK/init-$opt.st" --final "$WORK/t.st" --iters 5 \
        --batch 32 --lr 1e-3 --optimizer $opt $wd --tol 1e-5 --check-momentum --data "$DATA" >"$WORK/log" 2>&1; then
        ok "$opt on $layout rank(s): torch.optim's replay, $(grep '^max relative' "$WORK/log")"
      else
        fail "$opt on $layout rank(s) differs from torch.optim's replay"
        cat "$WORK/log"
      fi
    done
  done
else
  echo "# skipped (a): $PY cannot import torch"
fi

# (b) every strategy against 1 rank
for opt in adam adamw; do
  eval wd=\$WD_$opt
  run 1 1 $LENET --optimizer $opt $wd --iters 4 --save "$WORK/one-$opt.st" >/dev/null 2>&1 || fail "$opt: 1 rank"
  run 1 1 $LENET --optimizer $opt $wd --iters 4 --batch 16 --accumulate 2 --save "$WORK/one-k2-$opt.st" \
    >/dev/null 2>&1 || fail "$opt: 1 rank, --accumulate 2"
done
while read -r opt ref args; do
  eval wd=\$WD_$opt
  if run 2 1 $LENET --optimizer $opt $wd --iters 4 $args --save "$WORK/two.st" </dev/null >"$WORK/log" 2>&1 &&
    "$COMPARE" "$WORK/two.st" "$WORK/$ref-$opt.st" 1e-5 ignore=optimizer.global_batch ignore=optimizer.accumulate \
      >"$WORK/cmp" 2>&1; then
    ok "$opt on 2 ranks, $args: as 1 rank ($(tail -1 "$WORK/cmp"))"
  else
    fail "$opt on 2 ranks, $args: differs from 1 rank"
    cat "$WORK/log" "$WORK/cmp"
  fi
done <<EOF
adam one --grad-comm layer
adamw one --grad-comm end
adam one --grad-comm bucket:1 --comm-segment 4
adamw one --fc-replicate 1
adam one --parallel h2
adamw one --parallel conv2=c2,fc1=c2 --grad-comm end
adam one --comm-direct 4096
adamw one-k2 --batch 16 --accumulate 2
EOF

# (c) resume
for np in 1 2; do
  rm -f "$WORK/full.st" "$WORK/part.st" "$WORK/resumed.st"
  run $np 1 $LENET --optimizer adamw --iters 5 --save "$WORK/full.st" >"$WORK/log" 2>&1 ||
    { fail "resume: $np ranks, 5"; cat "$WORK/log"; }
  run $np 1 $LENET --optimizer adamw --iters 2 --save "$WORK/part.st" >"$WORK/log" 2>&1 ||
    { fail "resume: $np ranks, 2"; cat "$WORK/log"; }
  run $np 1 $LENET --optimizer adamw --iters 5 --resume "$WORK/part.st" --save "$WORK/resumed.st" >"$WORK/log" 2>&1 ||
    { fail "resume: $np ranks, --resume"; cat "$WORK/log"; }
  if cmp "$WORK/full.st" "$WORK/resumed.st"; then
    ok "adamw on $np rank(s): 2 iterations, then --resume to 5: the bytes of 5 uninterrupted"
  else
    fail "adamw on $np rank(s): the resumed run differs from the uninterrupted one"
  fi
done
# part.st and full.st are now 2 ranks': PyTorch loads part.st's state
# (step 2) into AdamW's state_dict() and goes on to full.st
if [ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  if "$PY" "$CHECK" --model "$MODELS/lenet.cfg" --init "$WORK/part.st" --final "$WORK/full.st" --iters 3 \
    --batch 32 --lr 1e-3 --optimizer adamw --tol 1e-5 --check-momentum --data "$DATA" >"$WORK/log" 2>&1; then
    ok "adamw: a checkpoint after 2 iterations in torch.optim.AdamW's state_dict(), 3 more there: as starconv's 5 ($(grep '^max relative' "$WORK/log"))"
  else
    fail "adamw: PyTorch resumed from starconv's state differs"
    cat "$WORK/log"
  fi
fi
run 1 1 $LENET --optimizer adamw --iters 5 --resume "$WORK/part.st" --save "$WORK/resumed1.st" >/dev/null 2>&1 ||
  fail "resume on 1 rank of a 2-rank checkpoint"
if "$COMPARE" "$WORK/resumed1.st" "$WORK/full.st" 1e-5 >"$WORK/cmp" 2>&1; then
  ok "adamw: saved on 2 ranks, resumed on 1: as the uninterrupted 2-rank run ($(tail -1 "$WORK/cmp"))"
else
  fail "adamw: saved on 2 ranks, resumed on 1: differs"
  cat "$WORK/cmp"
fi
run 1 1 $LENET --iters 5 --resume "$WORK/part.st" >"$WORK/log" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "no state of --optimizer sgd" "$WORK/log"; then
  ok "an adamw checkpoint does not --resume under sgd: $(grep "no state of" "$WORK/log")"
else
  fail "an adamw checkpoint under sgd's --resume: status $rc"
fi

# (d) --report-memory
state_of() { sed -n "s/^rank $2 optimizer state \([0-9]*\) bytes.*/\1/p" "$1"; }
run 1 1 $LENET --optimizer adam --iters 0 --report-memory >"$WORK/m1" 2>&1 || fail "--report-memory, 1 rank"
run 2 1 $LENET --optimizer adam --iters 0 --report-memory >"$WORK/m2" 2>&1 || fail "--report-memory, 2 ranks"
s1=$(state_of "$WORK/m1" 0) a=$(state_of "$WORK/m2" 0) b=$(state_of "$WORK/m2" 1)
if [ -n "$s1" ] && [ -n "$a" ] && [ -n "$b" ] &&
  awk -v s="$s1" -v a="$a" -v b="$b" 'BEGIN { exit !(a < 0.55 * s && b < 0.55 * s && a + b >= s) }'; then
  ok "--report-memory: Adam's state $s1 bytes on 1 rank, $a and $b on each of 2"
else
  fail "--report-memory: Adam's state $s1 bytes on 1 rank, '$a' and '$b' on 2"
  cat "$WORK/m2"
fi

# (e) --nonfinite skip: a NaN in iteration 3's samples
nan="--model $MODELS/lenet.cfg --batch 4 --shuffle off --test off --lr 1e-3 --data synthetic:1x28x28:10:nan=9"
for variant in "" "--fc-replicate 1"; do
  STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan $variant --optimizer adam --iters 3 --nonfinite skip --save "$WORK/s3.st" \
    >"$WORK/out" 2>&1
  rc=$?
  STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan $variant --optimizer adam --iters 2 --save "$WORK/s2.st" >/dev/null 2>&1
  if [ $rc -eq 0 ] && grep -q "3 iterations.*, 1 batches skipped" "$WORK/out" &&
    "$COMPARE" "$WORK/s3.st" "$WORK/s2.st" 0 ignore=optimizer.iteration >"$WORK/cmp" 2>&1; then
    ok "adam, a NaN in iteration 3, --nonfinite skip $variant: weights and state (step too) of iteration 2"
  else
    fail "adam, --nonfinite skip $variant: status $rc, or the weights or state moved"
    cat "$WORK/cmp"
  fi
done
finish
