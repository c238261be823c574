#!/bin/bash
# Run 29: run 27's protocol (every calibration made from nothing; the
# shared-memory run calibrates, its 1 Gbit/s twin starts from a copy with
# the network measured again inside slow-net) after the calibration
# became pass-wise (each pass times every kernel once; the median of 7
# passes), on the same machine as runs 27 and 28.
# Run as: validate.sh lenet2 lenet4 wide2 wide4 mesh2 mesh4 r50-2 (no arguments: all 16).
RESULTS=bench/results/plan-validate-2026-11-27c exec "$(dirname "$0")/../plan-validate-2026-11-27/validate.sh" "$@"
