# --grad-dtype bf16 (the gradient reductions' partial sums as bf16 on the
# wire, summed in fp32): (a) the conversions (tests/test_bf16: round to
# nearest even, ties, NaN, Inf, subnormals); (b) lenet on 2 and 4 ranks,
# sample parallel, against a PyTorch replay that rounds each sent partial
# sum to bf16 in the ring's order (tests/torch_grad_dtype.py): the weights'
# change over 5 iterations within 1e-4 relative.  Why 1e-4: one bf16
# rounding of a partial sum errs by up to 2^-9 of it, 2^-9 / sqrt(3) =
# 1.1e-3 RMS for a uniform error, which is what separates these runs from
# the replay without the rounding (fp32 on the wire); against the bf16
# replay only fp32 noise between oneDNN and PyTorch is left (1e-6 relative
# per gradient), which now and then flips a rounding to the neighbouring
# bf16, an order of magnitude below 1e-4 over 5 iterations: 1e-4 tells the
# two apart by about 10x both ways.  The same replay without the rounding must fail, and so must
# one that passes the partial sums round the other way (4 ranks), and the
# default fp32 against the fp32 replay must pass.  (c) --report-comm: the
# partial sums' bytes halve exactly (everything through the ring:
# --comm-direct 0), the weights sent back do not; by default the direct
# path's small vectors stay fp32.  The trace and --report say the dtype.
. "$TOP_SRCDIR/tests/common.sh"

if "$TOP_BUILDDIR/tests/test_bf16" >"$WORK/log" 2>&1; then
  ok "conversions: $(tail -1 "$WORK/log")"
else
  fail "conversions"
  grep FAIL "$WORK/log"
fi

PY=/usr/bin/python3
REPLAY="$TOP_SRCDIR/tests/torch_grad_dtype.py"
hp="--batch 16 --lr 0.02 --momentum 0.9 --weight-decay 0.001"
common="--model $MODELS/lenet.cfg $hp --shuffle off --seed 3 --test off"
ring="--grad-comm layer --comm-direct 0 --comm-segment 64"
if [ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  run 1 1 $common --iters 0 --save "$WORK/init.st" >/dev/null 2>&1 || fail "init checkpoint"
  replay() { # NP DTYPE-OF-THE-RUN WIRE ORDER
    "$PY" "$REPLAY" --model "$MODELS/lenet.cfg" --init "$WORK/init.st" --final "$WORK/final-$1-$2.st" --ranks "$1" \
      --iters 5 $hp --segment-kb 64 --wire "$3" --order "$4" --tol 1e-4 --data "$DATA" >"$WORK/replay" 2>&1
  }
  for np in 2 4; do
    for dt in bf16 fp32; do
      run $np 1 $common --iters 5 $ring --grad-dtype $dt --save "$WORK/final-$np-$dt.st" >"$WORK/log" 2>&1 ||
        fail "$np ranks --grad-dtype $dt: $(tail -1 "$WORK/log")"
    done
    if replay $np bf16 bf16 ring; then
      ok "$np ranks --grad-dtype bf16 = the bf16 ring replay: $(tail -1 "$WORK/replay")"
    else
      fail "$np ranks --grad-dtype bf16 differs from the bf16 ring replay"
      cat "$WORK/replay"
    fi
    if replay $np bf16 fp32 ring; then
      fail "$np ranks --grad-dtype bf16 passes as fp32 on the wire: the test cannot see the rounding"
    else
      ok "$np ranks --grad-dtype bf16 against the replay in fp32 fails, as it must: $(tail -1 "$WORK/replay")"
    fi
    if replay $np fp32 fp32 ring; then
      ok "$np ranks --grad-dtype fp32 (the default) = the fp32 replay: $(tail -1 "$WORK/replay")"
    else
      fail "$np ranks --grad-dtype fp32 differs from the fp32 replay"
      cat "$WORK/replay"
    fi
  done
  if replay 4 bf16 bf16 reversed; then
    fail "4 ranks: the replay in the reversed ring order passes too: the order is not tested"
  else
    ok "4 ranks against the replay in the reversed order fails, as it must: $(tail -1 "$WORK/replay")"
  fi
else
  echo "(no replay: $PY cannot import torch)"
fi

# (c) bytes: 'all ranks: T bytes, of which P partial sums (...), W weights sent back (fp32)'
bytes() { # DTYPE ARGS...: "T P W"
  dt=$1
  shift
  run 2 1 $common --iters 2 --grad-comm layer --grad-dtype "$dt" --report-comm "$@" >"$WORK/comm" 2>&1 ||
    { fail "--report-comm --grad-dtype $dt $*"; return; }
  sed -n 's/^all ranks: \([0-9]*\) bytes, of which \([0-9]*\) partial sums (.*), \([0-9]*\) weights sent back (fp32)$/\1 \2 \3/p' \
    "$WORK/comm"
}
set -- $(bytes fp32 --comm-direct 0) $(bytes bf16 --comm-direct 0)
if [ $# = 6 ] && [ "$2" -gt 0 ] && [ $(($2 / 2)) = "$5" ] && [ $(($2 % 2)) = 0 ] && [ "$3" = "$6" ] &&
  [ $(($2 + $3)) = "$1" ] && [ $(($5 + $6)) = "$4" ] && grep -q 'gradients bf16 on the wire' "$WORK/comm"; then
  ok "--report-comm, all through the ring: partial sums $2 -> $5 bytes (half), weights sent back $3 = $6, total $1 -> $4"
else
  fail "--report-comm --comm-direct 0: fp32 [$1 $2 $3] bf16 [${4-} ${5-} ${6-}]"
fi
# lenet's conv1 and fc2 (320 and 1290 floats) take the direct path by
# default: on 2 ranks rank 1 sends them to rank 0 in fp32 (6440 bytes)
direct=$(((320 + 1290) * 4))
set -- $(bytes fp32) $(bytes bf16)
if [ $# = 6 ] && [ $((($2 - direct) / 2 + direct)) = "$5" ] && [ "$3" = "$6" ]; then
  ok "--report-comm by default: partial sums $2 -> $5 bytes (the ring's half, the direct path's $direct in fp32)"
else
  fail "--report-comm by default: fp32 [$1 $2 $3] bf16 [${4-} ${5-} ${6-}]"
fi

# channel groups (n2c2 on 4 ranks: each convolution's gradient over the 2
# ranks that hold the same share of its weights): the group rings halve
# their partial sums too, and train as fp32 does within bf16's precision
# (1e-2 relative, weights and momentum, after 3 iterations: a few roundings
# of 2^-9 each, accumulated in the momentum)
for dt in fp32 bf16; do
  run 4 1 --model "$TOP_SRCDIR/tests/models/wide_small.cfg" --batch 8 --iters 3 --shuffle off --test off --seed 11 \
    --parallel n2c2 --comm-direct 0 --report-comm --grad-dtype $dt --save "$WORK/c-$dt.st" >"$WORK/comm-$dt" 2>&1 ||
    fail "n2c2 --grad-dtype $dt"
done
set -- $(sed -n 's/^all ranks: \([0-9]*\) bytes, of which \([0-9]*\) partial sums (.*), \([0-9]*\) weights sent back (fp32)$/\2 \3/p' \
  "$WORK/comm-fp32" "$WORK/comm-bf16")
if [ $# = 4 ] && [ "$1" -gt 0 ] && [ $(($1 / 2)) = "$3" ] && [ "$2" = "$4" ] &&
  "$COMPARE" "$WORK/c-fp32.st" "$WORK/c-bf16.st" 1e-2 >"$WORK/cmp" 2>&1 &&
  ! cmp -s "$WORK/c-fp32.st" "$WORK/c-bf16.st"; then
  ok "n2c2 channel groups: partial sums $1 -> $3 bytes, weights sent back $2 = $4; $(tail -1 "$WORK/cmp")"
else
  fail "n2c2 channel groups: [$*] $(tail -1 "$WORK/cmp")"
fi

# a NaN in the gradients survives the bf16 wire: --nonfinite skip skips
# the batch (sample 37 is in batch 3) on every rank, and 3 iterations end
# where 2 end
nan="--model $MODELS/lenet.cfg --batch 16 --shuffle off --test off --grad-dtype bf16 --comm-direct 0"
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan --data synthetic:1x28x28:10:nan=37 --iters 3 --nonfinite skip \
  --save "$WORK/n3.st" >"$WORK/out" 2>&1
STARPU_NCPU=1 "$MPIRUN" 2 "$TRAIN" $nan --data synthetic:1x28x28:10:nan=37 --iters 2 --save "$WORK/n2.st" \
  >/dev/null 2>&1
if grep -q "1 batches skipped (not finite)" "$WORK/out" &&
  "$COMPARE" "$WORK/n3.st" "$WORK/n2.st" 0 ignore=optimizer.iteration >/dev/null; then
  ok "a NaN crosses the bf16 wire: the batch skipped, the checkpoint that of 2 iterations"
else
  fail "NaN with --grad-dtype bf16: $(tail -2 "$WORK/out")"
fi

run 2 1 $common --iters 4 --grad-dtype bf16 --trace "$WORK/t.json" --trace-iters 2:3 --report --report-comm \
  >"$WORK/log" 2>&1 || fail "trace run"
# the trace's bytes: those --report-comm counts
total=$(sed -n 's/^all ranks: \([0-9]*\) bytes, .*/\1/p' "$WORK/log")
if grep -q "^bytes sent per iteration, all ranks: $total (grad_allreduce $total)\$" "$WORK/log" &&
  "$TOP_BUILDDIR/starconv-report" "$WORK/t.json" | grep -q "^bytes sent per iteration, all ranks: $total "; then
  ok "the trace counts the bytes --report-comm counts: $total an iteration"
else
  fail "the trace's bytes: $(grep '^bytes sent' "$WORK/log"), --report-comm $total"
fi
if grep -q '"grad_dtype":"bf16"' "$WORK/t.json" &&
  grep -q '^overlap report: .*, gradients bf16 on the wire, times in ms per iteration$' "$WORK/log" &&
  "$TOP_BUILDDIR/starconv-report" "$WORK/t.json" | head -1 | grep -q 'gradients bf16 on the wire'; then
  ok "the trace and the report say bf16"
else
  fail "the trace or the report do not say bf16: $(grep '^overlap report' "$WORK/log")"
fi
finish
