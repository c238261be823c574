# Residual networks: [shortcut], [route] (a projection block) and
# [global_avgpool] compute under every grid, and in either layout of the
# activations (--layouts), what one rank computes: the weights (and BN
# running statistics) after 3 iterations agree with 1 rank
# (relative 1e-5) for 2 workers, h2, w2, h2w2, and n2h2 against n2 (batch
# normalization statistics per sample group).  tests/models/residual.cfg's
# shortcut6 feeds two layers, so its gradient is a sum of two.  Bad graphs
# are refused with a one-line message and exit status 2.
. "$TOP_SRCDIR/tests/common.sh"

RES="$TOP_SRCDIR/tests/models/residual.cfg"
common="--batch 8 --lr 0.05 --momentum 0.9 --weight-decay 0.0005 --shuffle off --test off --seed 11 --iters 3"
# conv biases just before BN: zero gradient in exact arithmetic, rounding
# noise in practice (absolute tolerance)
zero="0.bias=1e-4 3.bias=1e-4 6.bias=1e-4 8.bias=1e-4 11.bias=1e-4 13.bias=1e-4"

same() { # NP NCPU GRID REF WHAT
  out="$WORK/res-$3-$1-$2.safetensors"
  if run "$1" "$2" --model "${MODEL:-$RES}" $common --parallel "$3" --save "$out" >"$WORK/log" 2>&1 &&
    "$COMPARE" "$out" "$4" 1e-5 ${zero:-}; then
    ok "residual: $5"
  else
    fail "residual: $5"
    tail -3 "$WORK/log"
  fi
}

run 1 1 --model "$RES" $common --save "$WORK/ref.safetensors" >/dev/null || fail "residual: 1-rank reference"
run 1 1 --model "$RES" $common --iters 0 --save "$WORK/init.safetensors" >/dev/null || fail "residual: init"
if "$COMPARE" "$WORK/ref.safetensors" "$WORK/init.safetensors" 1e-3 >/dev/null; then
  fail "residual: weights did not change in 3 iterations"
else
  ok "residual: weights changed from the initialization"
fi
same 1 2 n1 "$WORK/ref.safetensors" "2 workers match 1 worker"
# The activations channel-blocked as oneDNN prefers (the default on one
# rank's whole samples) against NCHW everywhere: the same weights, with
# fewer reorders of oneDNN's.
if run 1 1 --model "$RES" $common --layouts nchw --save "$WORK/nchw.safetensors" >"$WORK/log" 2>&1 &&
  "$COMPARE" "$WORK/nchw.safetensors" "$WORK/ref.safetensors" 1e-5 $zero >/dev/null; then
  ok "residual: --layouts nchw matches the blocked layouts"
else
  fail "residual: --layouts nchw"
fi
reorders() { ONEDNN_VERBOSE=1 run 1 1 --model "$RES" $common --iters 1 "$@" 2>&1 | grep -c 'exec,cpu,reorder'; }
blocked=$(reorders) plain=$(reorders --layouts nchw)
if [ "$blocked" -gt 0 ] && [ "$blocked" -lt "$plain" ]; then
  ok "residual: $blocked reorders in an iteration with blocked layouts, $plain in NCHW"
else
  fail "residual: $blocked reorders with blocked layouts, $plain in NCHW"
fi
same 2 1 h2 "$WORK/ref.safetensors" "h2 matches 1 rank"
same 2 1 w2 "$WORK/ref.safetensors" "w2 matches 1 rank"
same 4 1 h2w2 "$WORK/ref.safetensors" "h2w2 matches 1 rank"
run 2 1 --model "$RES" $common --parallel n2 --save "$WORK/n2.safetensors" >/dev/null || fail "residual: n2"
same 4 1 n2h2 "$WORK/n2.safetensors" "n2h2 matches n2"

# Without the biases of the convolutions before BN (bias=0): the same
# under spatial splits and with 2 workers; no bias tensors but BN's and
# fc's.
awk '{ l[NR] = $0 } END { for (i = 1; i <= NR; i++) { print l[i]; if (l[i] == "[convolutional]") {
  for (j = i + 1; j <= NR && substr(l[j], 1, 1) != "["; j++) ; if (l[j] == "[batchnorm]") print "bias=0" } } }' \
  "$RES" >"$WORK/nobias.cfg"
run 1 1 --model "$WORK/nobias.cfg" $common --save "$WORK/nb-ref.safetensors" >/dev/null || fail "bias=0: 1-rank reference"
nbias=$("$COMPARE" --show "$WORK/nb-ref.safetensors" | grep -c '^[0-9]*\.bias ')
if [ "$nbias" = 7 ]; then
  ok "bias=0: 7 bias tensors (BN's and fc's)"
else
  fail "bias=0: $nbias bias tensors, want 7"
fi
zero_saved=$zero
zero= MODEL="$WORK/nobias.cfg"
same 1 2 n1 "$WORK/nb-ref.safetensors" "bias=0: 2 workers match 1 worker"
same 2 1 h2 "$WORK/nb-ref.safetensors" "bias=0: h2 matches 1 rank"
same 2 1 w2 "$WORK/nb-ref.safetensors" "bias=0: w2 matches 1 rank"
zero=$zero_saved MODEL=

# refused clearly, exit status 2
refused() { # WHAT MESSAGE NP CFG [ARGS...]
  what=$1 msg=$2 np=$3 cfg=$4
  shift 4
  run "$np" 1 --model "$cfg" $common "$@" >"$WORK/log" 2>&1
  st=$?
  if [ "$st" -eq 2 ] && grep -q -- "$msg" "$WORK/log"; then
    ok "$what refused: $(grep -m1 -- "$msg" "$WORK/log")"
  else
    fail "$what: exit $st"
    cat "$WORK/log"
  fi
}
sed 's/^from=-4$/from=-8/' "$RES" >"$WORK/shape.cfg"
refused "a shortcut of two shapes" "the shapes must be equal" 1 "$WORK/shape.cfg"
sed 's/^layers=-5$/layers=12/' "$RES" >"$WORK/later.cfg"
refused "a route to a later layer" "must name an earlier layer" 1 "$WORK/later.cfg"
sed 's/^from=-4$/from=-1/' "$RES" >"$WORK/unused.cfg"
refused "an output nothing reads" "feeds no layer" 1 "$WORK/unused.cfg"
awk '{ print } /^\[shortcut\]$/ && !done { print "parallel=n2"; done = 1 }' "$RES" >"$WORK/split.cfg"
refused "a shortcut split unlike its inputs" "must be split like it" 2 "$WORK/split.cfg" --parallel h2

# ResNet-50 (224x224x3, 1000 classes) builds and trains on synthetic
# input, its convolutions split over 2 ranks by rows: one iteration, a
# finite loss; torchvision's 25,557,032 parameters (no convolution bias)
if run 2 1 --model "$MODELS/resnet50.cfg" --data synthetic:3x224x224:1000 --batch 2 --lr 0.01 --iters 1 \
  --log-every 1 --test off --parallel h2 >"$WORK/log" 2>&1 &&
  grep -q "25557032 parameters" "$WORK/log" && grep -Eq "iter 1 +loss [0-9]+\.[0-9]+" "$WORK/log"; then
  ok "resnet50.cfg trains on synthetic:3x224x224:1000 under h2: $(grep -Eo "iter 1 +loss [0-9.]+" "$WORK/log")"
else
  fail "resnet50.cfg under h2"
  tail -3 "$WORK/log"
fi
finish
