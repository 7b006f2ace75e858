#!/usr/bin/env bash
# The last H200 call of the fifth session (about 200 s on `nvidia-h200-x2`), after this session's judge changes:
#   GPU 0: the GPU tests of tests/test_gpu.py (the baseline against itself, timing, the timed-output check);
#   GPU 1: the cheats of the attack list that no GPU run of this session reached, through the judge.
# Carry: [".whl"]. Run from the repository root:   OUT=$OUT bash bench/next_h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=150 tests/test_gpu.py > $DEST/gpu-tests.txt 2>&1; tail -n 30 $DEST/gpu-tests.txt'
export TRACK1='python3 bench/judge_attacks_gpu.py --out $DEST/attacks --timeout 120 remembers_inputs.py slowed_oracle.py patches_timer.py detects_capture.py side_stream.py torch_only.py lazy_after_warmup.py 2>&1 | grep -E "ok=|no such"'
LIMIT=${LIMIT:-190} bash bench/two_gpu.sh
