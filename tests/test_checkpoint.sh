# Checkpoints saved on 2 ranks load on 1 and 4 ranks: the state round-trips
# exactly, and training continued from it on 1, 2 or 4 ranks agrees.
. "$TOP_SRCDIR/tests/common.sh"

common="--model $MODELS/lenet.cfg --batch 16 --lr 0.05 --momentum 0.9 --shuffle off --test off"
run 2 1 $common --iters 3 --save "$WORK/a.safetensors" >/dev/null || fail "train 3 iterations on 2 ranks"

for np in 1 4; do
  if run "$np" 1 $common --load "$WORK/a.safetensors" --iters 0 --save "$WORK/rt$np.safetensors" >/dev/null &&
    "$COMPARE" "$WORK/rt$np.safetensors" "$WORK/a.safetensors" 0; then
    ok "saved on 2 ranks, loaded and saved on $np: identical"
  else
    fail "round trip through $np ranks"
  fi
done

# Momentum and weights both matter for the next steps: continuing on 1 or 4
# ranks must agree with continuing on 2.
run 2 1 $common --load "$WORK/a.safetensors" --iters 2 --save "$WORK/c2.safetensors" >/dev/null || fail "continue on 2"
for np in 1 4; do
  if run "$np" 1 $common --load "$WORK/a.safetensors" --iters 2 --save "$WORK/c$np.safetensors" >/dev/null &&
    "$COMPARE" "$WORK/c$np.safetensors" "$WORK/c2.safetensors" 1e-5; then
    ok "continued on $np ranks matches continued on 2"
  else
    fail "continued training on $np ranks"
  fi
done

# The iteration counter went on from the checkpoint (3 + 2).
show=$("$COMPARE" --show "$WORK/c2.safetensors")
if echo "$show" | grep -qx 'optimizer.iteration I64 \[\] = 5' &&
  echo "$show" | grep -qx '0.weight F32 \[32, 1, 3, 3\]' && echo "$show" | grep -qx '7.weight F32 \[128, 3136\]' &&
  echo "$show" | grep -qx 'optimizer.9.bias.momentum_buffer F32 \[10\]'; then
  ok "iteration counter 5 and PyTorch state_dict names and shapes"
else
  echo "$show"
  fail "iteration counter or tensor names in the checkpoint"
fi
finish
