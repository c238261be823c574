#!/bin/bash
# Run 35: run 27's protocol (every calibration made here from nothing; the
# shared-memory run calibrates, its 1 Gbit/s twin starts from a copy with
# the network measured again inside slow-net) with the planner of run 33,
# on a machine none of runs 27-34 ran on (AMD EPYC family 26, AVX-512).
# Run as: validate.sh lenet2 lenet4 wide2 wide4 mesh2 mesh4 r50-2 (no arguments: all 16).
RESULTS=bench/results/plan-validate-2026-11-28e exec "$(dirname "$0")/../plan-validate-2026-11-27/validate.sh" "$@"
