#!/usr/bin/env bash
# What is still to be measured on the H200 (issues 5 and 6), in one device call on `nvidia-h200-x2`, about 560 s:
#   GPU 0: the GPU tests of the judge's changes (binding commitments, finite layout padding, the round-5 cheats)
#          and the GPU attack tests;
#   GPU 1: the example's autotuned QK-norm end to end (bench/autotune_example_gpu.sh), the clock's diagnostics of
#          the baseline against itself (the per-slot term), and (d) candidates per minute on RMSNorm.
# Carry: [".whl"]. Run from the repository root:   OUT=$OUT bash bench/next_h200.sh
# The results come back as $OUT/track0.tar.gz and $OUT/track1.tar.gz (bench/two_gpu.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='python3 -m pytest -v -rA --tb=short -s -m gpu -p no:cacheprovider tests/test_commitments.py tests/test_layout_trials.py tests/test_judge_attacks_round5.py tests/test_gpu_attacks.py > $DEST/gpu-tests.txt 2>&1; tail -n 80 $DEST/gpu-tests.txt'
export TRACK1='OUT=$DEST/autotune LIMIT=300 bash bench/autotune_example_gpu.sh; python3 bench/judge_diag.py rms_norm default > $DEST/diag.txt 2>&1; tail -n 30 $DEST/diag.txt; python3 bench/evaluator.py --parts d --candidates 8 --kernels rms_norm --out $DEST/d'
LIMIT=${LIMIT:-560} bash bench/two_gpu.sh
