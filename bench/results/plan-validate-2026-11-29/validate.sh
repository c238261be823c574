#!/bin/bash
# Run 36: run 27's protocol (every calibration made here from nothing; the
# shared-memory run calibrates, its 1 Gbit/s twin starts from a copy with
# the network measured again inside slow-net) with the planner of run 33
# (commit ed069ef), on a third kind of machine: AMD EPYC family 25 model
# 17 (Zen 4, AVX-512), after run 35's Zen 5 and runs 27-34's Zen 3.
# Run as: validate.sh (all 16), or validate.sh NAME... (e.g. r50-4).
RESULTS=bench/results/plan-validate-2026-11-29 exec "$(dirname "$0")/../plan-validate-2026-11-27/validate.sh" "$@"
