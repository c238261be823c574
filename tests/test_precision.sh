# --precision bf16: the convolutions and fully connected layers compute on
# bf16 inputs with fp32 accumulation, everything else in fp32.
#
# (a) lenet (5 iterations) and wide (1) on 1 rank give the weights of an
#     independent PyTorch replay (bench/torch_check.py --bf16: every
#     convolution and linear layer rounds x, the weights and dy to bf16,
#     to nearest even, and sums in float64).  Products of two bf16 are
#     exact in fp32, so only the order of the sums differs, but bf16
#     rounding is a step function: a value that the two orders put on
#     either side of a rounding boundary rounds a whole bf16 ulp (2^-8
#     relative) apart, and each layer of the chain turns the previous
#     one's differences into more such flips.  Perturbing each
#     convolution's output in the replay by 1e-7 relative (fp32 sum-order
#     noise) moves the replay itself, after 3 iterations of wide (12
#     roundings in the chain), by 5e-4: as far as starconv's fp32 weights
#     are from it, so wide is held after 1 iteration, where starconv is
#     within 2.2e-6 of the replay and fp32 4e-4 away: tolerance 2e-5.
#     lenet (6 roundings) after 5 iterations: within 4e-7, fp32 4e-3
#     away: tolerance 1e-4.  The check fails when bf16 is not used.
# (b) 2 ranks in bf16 (--parallel n2, h2, c2) against 1 rank in bf16 on
#     lenet, 4 iterations: relative 1e-4 on the weights, 1e-3 on the
#     momentum (gradients, whose bf16 roundings amplify the other sum order
#     of c2's partial sums to 1e-4; the weights agree to 1e-6; bf16 and
#     fp32 differ by 7e-2).
# (c) bf16 is not fp32: the checkpoints (weights, momentum) of bf16 and
#     fp32 differ by more than 1e-3 relative (fp32 runs agree to 1e-5 whatever the ranks), and
#     ONEDNN_VERBOSE shows the three directions of the convolutions and
#     of the fully connected layers (matmul) with bf16 inputs and fp32
#     outputs, none on oneDNN's reference code.
# Refusal: where oneDNN emulates bf16 (ONEDNN_MAX_CPU_ISA=AVX512_CORE, as
# on a CPU without AVX512-BF16), status 2 with one line and no checkpoint.
# On a CPU without bf16 the test checks that refusal and skips the rest.
# Ranks started with different --precision: status 2 (sc_train_check_ranks).
# (A bad --precision value: tests/test_errors.sh.)
. "$TOP_SRCDIR/tests/common.sh"

PY=/usr/bin/python3
CHECK="$TOP_SRCDIR/bench/torch_check.py"

# refused ENV...: --precision bf16 refused under ENV, status 2, one line
# naming what the CPU lacks, no checkpoint written.
refused() {
  rm -f "$WORK/refused.safetensors"
  env "$@" STARPU_NCPU=1 "$MPIRUN" 1 "$TRAIN" --data "$DATA" --precision bf16 --iters 1 --test off \
    --save "$WORK/refused.safetensors" >"$WORK/stdout" 2>"$WORK/stderr"
  rc=$?
  line=$(grep '^starconv-train: ' "$WORK/stderr")
  [ $rc -eq 2 ] && [ "$(printf '%s\n' "$line" | grep -c .)" -eq 1 ] &&
    printf '%s\n' "$line" | grep -q -- '--precision bf16: this CPU has neither AVX512-BF16 nor AMX-BF16' &&
    [ ! -e "$WORK/refused.safetensors" ]
}

if refused SC_NOTHING=1; then
  echo "ok refusal on this CPU: $line"
  echo "SKIP: this CPU has no native bf16 (AVX512-BF16 or AMX); the refusal above is all there is to check"
  exit 77
fi
grep -q '^starconv-train: ' "$WORK/stderr" && cat "$WORK/stderr"
if refused ONEDNN_MAX_CPU_ISA=AVX512_CORE; then
  ok "refused where oneDNN emulates bf16: $line"
else
  fail "ONEDNN_MAX_CPU_ISA=AVX512_CORE --precision bf16: status $rc, want 2 and one line"
  cat "$WORK/stderr"
fi

hyper="--batch 32 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --shuffle off --seed 3 --test off"

# (a) against the PyTorch replay
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
  fail "$PY cannot import torch (Debian package python3-torch): no replay"
else
  for spec in lenet:5:1e-4 wide:1:2e-5; do
    model=${spec%%:*} rest=${spec#*:}
    iters=${rest%%:*} tol=${rest#*:}
    common="--model $MODELS/$model.cfg $hyper"
    run 1 1 $common --iters 0 --save "$WORK/$model-init.safetensors" >/dev/null 2>&1 || fail "$model: init"
    for precision in bf16 fp32; do
      run 1 1 $common --iters "$iters" --precision $precision --save "$WORK/$model-$precision.safetensors" \
        >/dev/null 2>&1 || fail "$model: $iters iterations in $precision"
      "$PY" "$CHECK" --model "$MODELS/$model.cfg" --init "$WORK/$model-init.safetensors" \
        --final "$WORK/$model-$precision.safetensors" --iters "$iters" --batch 32 --lr 0.02 --momentum 0.9 \
        --weight-decay 0.001 --data "$DATA" --bf16 --tol "$tol" >"$WORK/log-$precision" 2>&1
      echo $? >"$WORK/rc-$precision"
    done
    worst=$(grep '^max relative error' "$WORK/log-bf16")
    if [ "$(cat "$WORK/rc-bf16")" = 0 ]; then
      ok "$model: bf16 matches the bf16 PyTorch replay after $iters iterations within $tol ($worst)"
    else
      fail "$model: bf16 differs from the bf16 PyTorch replay (tolerance $tol)"
      cat "$WORK/log-bf16"
    fi
    if [ "$(cat "$WORK/rc-fp32")" = 1 ]; then
      ok "$model: fp32 weights miss the same replay ($(grep '^max relative error' "$WORK/log-fp32"))"
    else
      fail "$model: fp32 weights pass the bf16 replay (the check cannot tell bf16 from fp32)"
    fi
  done
fi

# (b) 2 ranks against 1 in bf16
common="--model $MODELS/lenet.cfg $hyper --iters 4 --precision bf16"
run 1 1 $common --save "$WORK/bf16-1.safetensors" >/dev/null 2>&1 || fail "lenet bf16 on 1 rank"
for grid in n2 h2 c2; do
  rm -f "$WORK/bf16-2.safetensors"
  if run 2 1 $common --parallel $grid --save "$WORK/bf16-2.safetensors" >"$WORK/log" 2>&1 &&
    "$COMPARE" "$WORK/bf16-2.safetensors" "$WORK/bf16-1.safetensors" 1e-4 momentum=1e-3 >"$WORK/cmp" 2>&1; then
    ok "lenet bf16 on 2 ranks (--parallel $grid) matches 1 rank: $(tail -1 "$WORK/cmp")"
  else
    fail "lenet bf16 on 2 ranks (--parallel $grid) differs from 1 rank or failed"
    tail -n 3 "$WORK/log" "$WORK/cmp"
  fi
done

# (c) bf16 is not fp32
run 1 1 --model "$MODELS/lenet.cfg" $hyper --iters 4 --save "$WORK/fp32-1.safetensors" >/dev/null 2>&1 ||
  fail "lenet fp32 on 1 rank"
if "$COMPARE" "$WORK/bf16-1.safetensors" "$WORK/fp32-1.safetensors" 1e-3 >"$WORK/cmp" 2>&1; then
  fail "lenet: bf16 checkpoint within 1e-3 of fp32's: bf16 did not run ($(tail -1 "$WORK/cmp"))"
else
  ok "lenet: bf16 and fp32 checkpoints differ by more than 1e-3 ($(tail -1 "$WORK/cmp"))"
fi
ONEDNN_VERBOSE=1 run 1 1 --model "$MODELS/wide.cfg" $hyper --iters 1 --precision bf16 >"$WORK/verbose" 2>&1 ||
  fail "wide bf16 under ONEDNN_VERBOSE"
convs=$(grep '^onednn_verbose,exec,cpu,convolution,' "$WORK/verbose")
fwd=$(printf '%s\n' "$convs" | grep -c ',forward_training,src_bf16:.* wei_bf16:.* dst_f32:')
bwd_data=$(printf '%s\n' "$convs" | grep -c ',backward_data,src_f32:.* wei_bf16:.* dst_bf16:')
bwd_w=$(printf '%s\n' "$convs" | grep -c ',backward_weights,src_bf16:.* wei_f32:.* dst_bf16:')
all=$(printf '%s\n' "$convs" | grep -c .)
fc=$(grep -c '^onednn_verbose,exec,cpu,matmul,[^r][^,]*,undef,src_bf16:.* wei_bf16:.* dst_f32:' "$WORK/verbose")
ref=$(printf '%s\n' "$convs" | grep -c ',ref')
if [ "$fwd" = 4 ] && [ "$bwd_data" = 3 ] && [ "$bwd_w" = 4 ] && [ "$all" = 11 ] && [ "$ref" = 0 ] &&
  [ "$fc" = 6 ]; then
  ok "wide: ONEDNN_VERBOSE shows 4 forward, 3 backward-data, 4 backward-weights convolutions and 6 matmuls on bf16 inputs, fp32 outputs, none on ref"
else
  fail "wide: ONEDNN_VERBOSE shows $fwd/4 forward, $bwd_data/3 backward-data, $bwd_w/4 backward-weights bf16 convolutions of $all, $ref on ref, $fc/6 bf16 matmuls"
  printf '%s\n' "$convs" | head -12
fi
if grep -q '; convolutions on CPU: oneDNN [^ r][^ ]* in bf16 (fp32 accumulation and outputs)$' "$WORK/verbose"; then
  ok "the start-up line names the bf16 implementation"
else
  fail "the start-up line does not name a bf16 implementation"
  grep 'convolutions on CPU' "$WORK/verbose"
fi

# ranks started with different --precision stop at start-up
STARPU_NCPU=1 SC_TEST_TIMEOUT=120 "$MPIRUN" 1 "$TRAIN" --data "$DATA" --iters 1 --test off : -np 1 "$TRAIN" \
  --data "$DATA" --iters 1 --test off --precision bf16 >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -eq 2 ] && grep -q 'ranks 0 and 1 were started with different options' "$WORK/err"; then
  ok "ranks with different --precision: exit 2"
else
  fail "ranks with different --precision: exit $rc"
  head -n 5 "$WORK/err"
fi

finish
