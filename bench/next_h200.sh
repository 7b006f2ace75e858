#!/usr/bin/env bash
# What is still to be measured on the H200 (issues 5 and 6), in one device call on `nvidia-h200-x2`, about 500 s:
#   GPU 0: the GPU tests the previous call did not finish (the round-5 parity cheat, the window-extra cheats,
#          the secret, the kernel named void), each under a 150 s limit, with tracebacks;
#   GPU 1: the example's QK-norm: every config pinned at decode and prefill, and its autotuner's first pick in
#          fresh processes (bench/qk_norm_configs_gpu.py); then (c) the QK-norm against a copy of itself, 2 runs.
# Carry: [".whl"]. Run from the repository root:   OUT=$OUT bash bench/next_h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=150 "tests/test_judge_attacks_round5.py::test_gpu_a_slowdown_claimed_as_parity_is_not_credited_parity" tests/test_gpu_attacks.py -k "parity or shed or secret or void or hogs" > $DEST/gpu-tests.txt 2>&1; tail -n 60 $DEST/gpu-tests.txt'
export TRACK1='python3 bench/qk_norm_configs_gpu.py > $DEST/qk-configs.json 2> $DEST/qk-configs.txt; cat $DEST/qk-configs.txt; python3 bench/evaluator.py --parts c --autotuned qk_rms_norm --runs 2 --out $DEST/c'
LIMIT=${LIMIT:-500} bash bench/two_gpu.sh
