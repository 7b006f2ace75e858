#!/usr/bin/env bash
# The last H200 call of the fifth session (about 190 s on `nvidia-h200-x2`), after the round-6 fixes (BLAKE2b
# window digest, in-place writes in the window, one-pass window fill, drawn pad widths, two kinds of padding):
#   GPU 0: the GPU tests of rounds 5 and 6 and of the layout trials;
#   GPU 1: tests/test_gpu.py (the baseline against itself, timing, the timed-output check).
# Carry: [".whl"]. Run from the repository root:   OUT=$OUT bash bench/next_h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=120 tests/test_judge_attacks_round6.py tests/test_layout_trials.py tests/test_commitments.py > $DEST/gpu-tests.txt 2>&1; tail -n 30 $DEST/gpu-tests.txt'
export TRACK1='python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=120 tests/test_gpu.py > $DEST/gpu-tests.txt 2>&1; tail -n 30 $DEST/gpu-tests.txt'
LIMIT=${LIMIT:-185} bash bench/two_gpu.sh
