#!/usr/bin/env bash
# The tenth session's H200 calls (one GPU, nvidia-h200; carry [".whl"]): OUT=$OUT STEP=first|d|a bash bench/session10_h200.sh
#   first: what no GPU has run yet: the mixed tree node on CUDA (bench/commit_check_gpu.py: the device's integers against
#          the CPU's, and a commitment's cost), the window's openings (runners/openings.py) in the GPU tests, the skipping cheat
#          of round 4 (section 5) that they close, and tests/test_gpu.py whole (the ninth session's call 3 left two
#          failures whose details were cut off);
#   d:     (d) on RMSNorm with the correctness phase's parts and the window's (timing.window_reveal holds the openings);
#   a:     (a) for layer_norm, the baseline against itself in fresh evaluators (RUNS, default 5).
source "$(dirname "$0")/device_setup.sh"
case "${STEP:-first}" in
  first)
    timeout 60 python3 bench/commit_check_gpu.py > "$OUT/commit-check.json" 2>&1; echo "commit check rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if k != 'checks'}, \
all(d['checks'].values()))" "$OUT/commit-check.json"
    timeout 200 $PYTEST -s tests/test_judge_attacks_round4.py -k "few_slots" > "$OUT/gpu-openings.txt" 2>&1
    echo "openings rc=$?"; grep -E "^(FAILED|ERROR)|AssertionError|passed|failed" "$OUT/gpu-openings.txt" | tail -6
    timeout 330 $PYTEST -s tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|AssertionError|passed|failed" "$OUT/gpu-tests.txt" | tail -12
    ;;
  d)
    timeout 200 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates 8 > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; tail -2 "$OUT/d-pipeline.txt" | cut -c1-700
    python3 -c "import json,sys; rows=json.load(open(sys.argv[1]))['d']['rows']
for r in rows: print({k: round(v, 2) for k, v in r['phases'].items() if k.startswith(('correctness', 'timing'))})" \
      "$OUT/d-pipeline/evaluator.json"
    ;;
  a)
    timeout 500 python3 bench/evaluator.py --out "$OUT/a-layer-norm" --parts a --kernels layer_norm --runs "${RUNS:-5}" \
      > "$OUT/a-layer-norm.txt" 2>&1
    echo "layer_norm (a) rc=$?"; tail -12 "$OUT/a-layer-norm.txt" | cut -c1-300
    ;;
esac
