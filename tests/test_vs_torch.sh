# starconv trains what PyTorch trains: from the same initial checkpoint, 8
# iterations on 2 ranks, and a residual BN network on 1 rank with and
# without the convolutions' biases (shuffle off, momentum, weight decay),
# give the weights that torch.optim.SGD gives (relative 1e-4: float32 in
# two libraries); a starconv checkpoint loads into PyTorch's nn.Sequential
# with the test accuracy starconv measured; a ResNet-50 checkpoint loads
# into torchvision's resnet50() (where python3-torchvision is installed).
# Skipped without Debian's python3-torch.
. "$TOP_SRCDIR/tests/common.sh"

PY=/usr/bin/python3
CHECK="$TOP_SRCDIR/bench/torch_check.py"
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $PY cannot import torch (Debian package python3-torch)"
  exit 77
fi

for model in lenet wide; do
  common="--model $MODELS/$model.cfg --batch 32 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --shuffle off --seed 3"
  run 1 1 $common --iters 0 --test off --save "$WORK/$model-init.safetensors" >/dev/null || fail "$model: init"
  run 2 1 $common --iters 8 --test off --save "$WORK/$model-final.safetensors" >/dev/null || fail "$model: 8 iterations"
  if "$PY" "$CHECK" --model "$MODELS/$model.cfg" --init "$WORK/$model-init.safetensors" \
    --final "$WORK/$model-final.safetensors" --iters 8 --batch 32 --lr 0.02 --momentum 0.9 \
    --weight-decay 0.001 --data "$DATA"; then
    ok "$model: starconv on 2 ranks matches PyTorch after 8 iterations"
  else
    fail "$model: starconv differs from PyTorch"
  fi
done

# a residual network with batch normalization (its statistics over the
# whole batch, so 1 rank; test_residual.sh checks 2 workers and the grids
# against it):
# weights and BN running statistics after 2 iterations.  (Not 8: the BN
# biases of this network stay near zero and amplify rounding: from the 3rd
# iteration on, PyTorch's own float32 result differs from its float64
# result by 1.5e-4 and more, and starconv's by as much.)
RES="$TOP_SRCDIR/tests/models/residual.cfg"
common="--model $RES --batch 32 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --shuffle off --seed 3"
run 1 1 $common --iters 0 --test off --save "$WORK/res-init.safetensors" >/dev/null || fail "residual: init"
run 1 1 $common --iters 2 --test off --save "$WORK/res-final.safetensors" >/dev/null || fail "residual: 2 iterations"
if "$PY" "$CHECK" --model "$RES" --init "$WORK/res-init.safetensors" --final "$WORK/res-final.safetensors" \
  --iters 2 --batch 32 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --data "$DATA" >"$WORK/log" 2>&1; then
  ok "residual.cfg (shortcut, route, BN, global average pooling): weights and running statistics match PyTorch"
else
  fail "residual.cfg differs from PyTorch"
  cat "$WORK/log"
fi
# The same network without the biases of the convolutions before BN
# (bias=0, as torchvision's ResNet-50 has them): PyTorch's replay builds
# its Conv2d without bias too, and the checkpoint has no such tensors.
awk '{ l[NR] = $0 } END { for (i = 1; i <= NR; i++) { print l[i]; if (l[i] == "[convolutional]") {
  for (j = i + 1; j <= NR && substr(l[j], 1, 1) != "["; j++) ; if (l[j] == "[batchnorm]") print "bias=0" } } }' \
  "$RES" >"$WORK/res-nobias.cfg"
NB="$WORK/res-nobias.cfg"
common="--model $NB --batch 32 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --shuffle off --seed 3"
run 1 1 $common --iters 0 --test off --save "$WORK/nb-init.safetensors" >/dev/null || fail "bias=0: init"
run 1 1 $common --iters 2 --test off --save "$WORK/nb-final.safetensors" >/dev/null || fail "bias=0: 2 iterations"
nbias=$("$COMPARE" --show "$WORK/nb-init.safetensors" | grep -c '^[0-9]*\.bias ')
if [ "$(grep -c '^bias=0$' "$NB")" = 6 ] && [ "$nbias" = 7 ] &&
  "$PY" "$CHECK" --model "$NB" --init "$WORK/nb-init.safetensors" --final "$WORK/nb-final.safetensors" \
    --iters 2 --batch 32 --lr 0.02 --momentum 0.9 --weight-decay 0.001 --data "$DATA" >"$WORK/log" 2>&1; then
  ok "residual.cfg with bias=0 on its 6 convolutions before BN: 7 bias tensors left (BN's, fc's), matches PyTorch"
else
  fail "residual.cfg with bias=0: $(grep -c '^bias=0$' "$NB") bias=0 lines, $nbias bias tensors, or differs from PyTorch"
  cat "$WORK/log"
fi

# A ResNet-50 checkpoint (models/resnet50.cfg on 64x64 images, for time)
# loads into torchvision's resnet50() under strict names, with the logits
# of the cfg's own PyTorch model; another model's is refused.
if "$PY" -c 'import torchvision' 2>/dev/null; then
  TV="$TOP_SRCDIR/bench/resnet50_torchvision.py"
  sed 's/^height=224$/height=64/; s/^width=224$/width=64/' "$MODELS/resnet50.cfg" >"$WORK/r50.cfg"
  run 1 1 --model "$WORK/r50.cfg" --data synthetic:3x64x64:1000 --batch 2 --iters 2 --test off \
    --save "$WORK/r50.safetensors" >/dev/null 2>&1 || fail "resnet50 (64x64): 2 iterations"
  if "$PY" "$TV" "$WORK/r50.safetensors" --model "$WORK/r50.cfg" --check >"$WORK/log" 2>&1 &&
    grep -q ' 25557032 parameters$' "$WORK/log" && grep -q '^same: ' "$WORK/log"; then
    ok "ResNet-50 checkpoint in torchvision's resnet50(): $(tr '\n' ' ' <"$WORK/log")"
  else
    fail "ResNet-50 checkpoint in torchvision's resnet50()"
    cat "$WORK/log"
  fi
  "$PY" "$TV" "$WORK/res-init.safetensors" --model "$RES" >"$WORK/log" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c . "$WORK/log")" -eq 1 ]; then
    ok "resnet50_torchvision.py refuses another model: $(cat "$WORK/log")"
  else
    fail "resnet50_torchvision.py on residual.cfg: exit $rc (want 2 and one line)"
    cat "$WORK/log"
  fi
else
  echo "note: no torchvision (Debian package python3-torchvision): the ResNet-50 name map is not checked"
fi

# eval_in_torch NP NCPU MODEL ITERS WHAT: a checkpoint trained on NP ranks
# evaluates in PyTorch (eval mode) to the test accuracy starconv measured
eval_in_torch() {
  ckpt="$WORK/eval-$(basename "$3" .cfg).safetensors"
  out=$(run "$1" "$2" --model "$3" --batch 64 --iters "$4" --save "$ckpt" 2>/dev/null)
  ours=$(echo "$out" | sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p')
  theirs=$("$PY" "$CHECK" --model "$3" --eval "$ckpt" --data "$DATA" |
    sed -n 's/.*test accuracy: \([0-9.]*\)%.*/\1/p')
  if [ -n "$ours" ] && [ -n "$theirs" ] && awk "BEGIN { d = $ours - $theirs; exit !(d <= 0.1 && d >= -0.1) }"; then
    ok "$5 loads in PyTorch: test accuracy $theirs% there, $ours% here"
  else
    fail "$5: test accuracy in PyTorch '${theirs:-none}' vs starconv '${ours:-none}'"
  fi
}
# the residual one's BN layers evaluate with the checkpoint's running statistics
eval_in_torch 1 2 "$RES" 100 "residual checkpoint (BN running statistics)"
eval_in_torch 2 1 "$MODELS/lenet.cfg" 150 "checkpoint"
# Learning-rate schedules with warm-up: starconv's rate of each iteration
# (--metrics) is what torch.optim.lr_scheduler gives, the weights after 8
# iterations on 2 ranks are PyTorch's, and a run resumed in the middle of
# a schedule ends bit-identical to an uninterrupted one.
common="--model $MODELS/lenet.cfg --batch 32 --lr 0.05 --momentum 0.9 --shuffle off --seed 3"
run 1 1 $common --iters 0 --test off --save "$WORK/sched-init.safetensors" >/dev/null || fail "schedules: init"
for sched in "step:2,5:0.5 --warmup 2" "cosine:0.001 --warmup 3:0.25"; do
  name=${sched%% *}
  run 2 1 $common --iters 8 --test off --lr-schedule $sched --log-every 1 --metrics "$WORK/sched.json" \
    --load "$WORK/sched-init.safetensors" --save "$WORK/sched-final.safetensors" >/dev/null || fail "$name: 8 iterations"
  # shellcheck disable=SC2086 # $sched is an option and its value, or two
  "$PY" "$CHECK" --model "$MODELS/lenet.cfg" --print-lr 8 --lr 0.05 --lr-schedule $sched >"$WORK/torch-lr" ||
    fail "$name: torch_check --print-lr"
  sed -n 's/.*"iteration": [0-9]*,.*"lr": \([^}]*\)}.*/\1/p' "$WORK/sched.json" >"$WORK/sc-lr"
  if [ "$(wc -l <"$WORK/sc-lr")" -eq 8 ] &&
    paste "$WORK/sc-lr" "$WORK/torch-lr" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-7 * $2) bad = 1 } END { exit bad }'; then
    ok "$name: the learning rate of every iteration is torch.optim.lr_scheduler's"
  else
    fail "$name: learning rates differ: $(paste "$WORK/sc-lr" "$WORK/torch-lr" | tr '\n' ' ')"
  fi
  if "$PY" "$CHECK" --model "$MODELS/lenet.cfg" --init "$WORK/sched-init.safetensors" \
    --final "$WORK/sched-final.safetensors" --iters 8 --batch 32 --lr 0.05 --momentum 0.9 \
    --lr-schedule $sched --data "$DATA" >"$WORK/check.log"; then
    ok "$name: starconv on 2 ranks matches PyTorch's scheduler after 8 iterations"
  else
    fail "$name: starconv differs from PyTorch: $(tail -n 3 "$WORK/check.log")"
  fi
done
run 2 1 $common --iters 4 --test off --lr-schedule cosine:0.001 --warmup 3:0.25 --load "$WORK/sched-init.safetensors" \
  --save "$WORK/sched-half.safetensors" >/dev/null &&
  run 2 1 $common --iters 8 --test off --lr-schedule cosine:0.001 --warmup 3:0.25 \
    --resume "$WORK/sched-half.safetensors" --save "$WORK/sched-resumed.safetensors" >/dev/null ||
  fail "cosine: a run resumed after 4 of 8 iterations"
if cmp -s "$WORK/sched-resumed.safetensors" "$WORK/sched-final.safetensors"; then
  ok "cosine: resumed after 4 of 8 iterations, bit-identical to the run without a stop"
else
  fail "cosine: the resumed run's checkpoint differs from the uninterrupted one's"
fi
finish
