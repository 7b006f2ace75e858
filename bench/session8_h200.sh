#!/usr/bin/env bash
# The eighth session's H200 calls (one GPU, nvidia-h200; carry [".whl"]): OUT=$OUT STEP=a|b bash bench/session8_h200.sh
#   a: the commitments' tree kernel (runners/hash_tree.py) against the CPU's integers and its cost
#      (bench/commit_check_gpu.py), the judge's clock per round with the oracle's parts (pass, fill, commit, lead:
#      bench/judge_diag.py on RMSNorm), then tests/test_gpu.py, the GPU commitments test and round 7's queued-work test;
#   ab: both in one call (round 7's test left out);
#   b: the tuner's choice of config by size on the example's QK-norm (bench/autotune_choice_gpu.sh, PINS=4).
source "$(dirname "$0")/device_setup.sh"
case "${STEP:-a}" in
  a)
    timeout 60 python3 bench/commit_check_gpu.py > "$OUT/commit-check.json" 2>&1; echo "commit check rc=$?"
    timeout 150 python3 bench/judge_diag.py rms_norm default > "$OUT/diag-rms.txt" 2>&1; echo "diag rc=$?"
    cut -c1-400 "$OUT/diag-rms.txt"
    timeout 330 $PYTEST tests/test_gpu.py tests/test_commitments.py \
      "tests/test_judge_attacks_round7.py::test_gpu_device_work_queued_before_the_pause_earns_no_credit" \
      > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(PASSED|FAILED|ERROR|XPASS|XFAIL)|passed|failed" "$OUT/gpu-tests.txt" | tail -25
    ;;
  b)
    OUT=$OUT/choice PINS=4 LIMIT=500 bash bench/autotune_choice_gpu.sh
    ;;
  ab)  # a's checks without round 7's test, then b, in one call of under 600 s
    timeout 60 python3 bench/commit_check_gpu.py > "$OUT/commit-check.json" 2>&1; echo "commit check rc=$?"
    grep "commit us\|false" "$OUT/commit-check.json"
    timeout 120 python3 bench/judge_diag.py rms_norm default > "$OUT/diag-rms.txt" 2>&1; echo "diag rc=$?"
    cut -c1-330 "$OUT/diag-rms.txt"
    timeout 220 $PYTEST tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu-tests.txt" | tail -8
    OUT=$OUT/choice PINS=4 LIMIT=230 bash bench/autotune_choice_gpu.sh 2>&1 | tail -12
    ;;
esac
