#!/usr/bin/env bash
# The first H200 call of the next session (sixth session's changes, none of them run on a GPU yet: this session had
# no device time left). About 4-6 min on `nvidia-h200-x2`:
#   GPU 0: the window's commitments with the feed-forward (bench/commit_check_gpu.py: CUDA's integers against the
#          CPU's, captured plan included), then the GPU tests of rounds 5-7, the layout trials, the commitments and
#          the kernel names (structured rows in the window, range scalars per slot, whole-row pads, dict outputs);
#   GPU 1: tests/test_gpu.py (the baseline against itself with the lead following the slot count, timing, the
#          timed-output check), then the tuner's choice of config by size on the example's QK-norm
#          (bench/autotune_choice_gpu.sh, gated on a verified speedup over the baseline and every pin).
# Carry: [".whl"]. Run from the repository root:   OUT=$OUT bash bench/next_h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='python3 bench/commit_check_gpu.py > $DEST/commit-check.json 2>&1; echo "commit check rc=$?"; python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=150 tests/test_judge_attacks_round5.py tests/test_judge_attacks_round6.py tests/test_judge_attacks_round7.py tests/test_layout_trials.py tests/test_commitments.py tests/test_kernel_names.py tests/test_output_kinds.py > $DEST/gpu-tests.txt 2>&1; tail -n 40 $DEST/gpu-tests.txt'
export TRACK1='python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=150 tests/test_gpu.py > $DEST/gpu-tests.txt 2>&1; tail -n 30 $DEST/gpu-tests.txt; OUT=$DEST/choice PINS=4 bash bench/autotune_choice_gpu.sh > $DEST/choice.txt 2>&1; tail -n 30 $DEST/choice.txt'
# On `nvidia-h200` (one GPU) give one track per call: ONLY=0 or ONLY=1.
[ "${ONLY:-}" = 1 ] && unset TRACK0
[ "${ONLY:-}" = 0 ] && unset TRACK1
LIMIT=${LIMIT:-420} bash bench/two_gpu.sh
