#!/usr/bin/env bash
# The last H200 call of the fifth session (about 240 s on `nvidia-h200-x2`): after the lead sleep stopped being
# credited (runners/judge_clock.py corroborate) and became 4x shorter (Protocol.window_lead_cycles):
#   GPU 0: the window-extra cheats and the round-5 parity cheat (GPU tests, tracebacks);
#   GPU 1: the baseline against itself under the default protocol (bench/judge_diag.py), the judge's ratios.
# Carry: [".whl"]. Run from the repository root:   OUT=$OUT bash bench/next_h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=150 "tests/test_judge_attacks_round5.py::test_gpu_a_slowdown_claimed_as_parity_is_not_credited_parity" tests/test_gpu_attacks.py -k "parity or shed" > $DEST/gpu-tests.txt 2>&1; tail -n 40 $DEST/gpu-tests.txt'
export TRACK1='python3 bench/judge_diag.py rms_norm default > $DEST/diag.txt 2>&1; tail -n 12 $DEST/diag.txt'
LIMIT=${LIMIT:-230} bash bench/two_gpu.sh
