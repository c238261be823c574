#!/bin/bash
# Run 28: the BN networks of run 27 (mesh128, resnet50) again after the
# synthetic data and the BN and residual kernels got faster (69b476f,
# bd781e6), on the same machine with run 27's protocol, every calibration
# made from nothing (the shared-memory run calibrates; its 1 Gbit/s twin
# starts from a copy with the network measured again inside slow-net).
# Run as: validate.sh mesh2 mesh4 r50-2 r50-4 (no arguments: all 16).
RESULTS=bench/results/plan-validate-2026-11-27b exec "$(dirname "$0")/../plan-validate-2026-11-27/validate.sh" "$@"
