# starconv trains what PyTorch trains: from the same initial checkpoint, 8
# iterations on 2 ranks (shuffle off, momentum, weight decay) give the
# weights that torch.optim.SGD gives (relative 1e-4: float32 in two
# libraries); and a starconv checkpoint loads into PyTorch's nn.Sequential
# with the test accuracy starconv measured.  Skipped without Debian's
# python3-torch.
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

out=$(run 2 1 --model "$MODELS/lenet.cfg" --batch 64 --iters 150 --save "$WORK/eval.safetensors" 2>/dev/null)
ours=$(echo "$out" | sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p')
theirs=$("$PY" "$CHECK" --model "$MODELS/lenet.cfg" --eval "$WORK/eval.safetensors" --data "$DATA" |
  sed -n 's/.*test accuracy: \([0-9.]*\)%.*/\1/p')
if [ -n "$ours" ] && [ -n "$theirs" ] && awk "BEGIN { d = $ours - $theirs; exit !(d <= 0.1 && d >= -0.1) }"; then
  ok "checkpoint loads in PyTorch: test accuracy $theirs% there, $ours% here"
else
  fail "test accuracy in PyTorch '${theirs:-none}' vs starconv '${ours:-none}'"
fi
finish
