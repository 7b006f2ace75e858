#!/usr/bin/env bash
# The ninth session's H200 calls (one GPU, nvidia-h200; carry [".whl"]): OUT=$OUT STEP=d|g bash bench/session9_h200.sh
#   d: (d) throughput on RMSNorm under the search protocol, the search's pipeline (the next candidate loaded and
#      compiled in the warm spare while one is judged) against one candidate at a time, and the GPU prefetch test;
#   dg: the pipeline's (d), then tests/test_gpu.py;
#   dga: the pipeline's (d), tests/test_gpu.py, then (a) for layer_norm (the baseline against itself, fresh evaluators);
#   g: tests/test_gpu.py, then (a) for layer_norm;
#   next: what the ninth session left to check first: tests/test_gpu.py whole (its call 3 was cut before the two
#         failures' details printed), then (d) with the correctness phase's parts (correctness.* in the rows).
source "$(dirname "$0")/device_setup.sh"
N=${N:-12}
case "${STEP:-d}" in
  d)
    timeout 230 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates "$N" > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; tail -2 "$OUT/d-pipeline.txt" | cut -c1-600
    timeout 230 python3 bench/evaluator.py --out "$OUT/d-one-at-a-time" --parts d --candidates "$N" --no-prefetch \
      > "$OUT/d-one-at-a-time.txt" 2>&1
    echo "one at a time rc=$?"; tail -2 "$OUT/d-one-at-a-time.txt" | cut -c1-600
    timeout 100 $PYTEST -s tests/test_gpu.py -k prefetched > "$OUT/gpu-prefetch-test.txt" 2>&1
    echo "prefetch test rc=$?"; grep -E "prefetched:|passed|failed" "$OUT/gpu-prefetch-test.txt" | tail -4
    ;;
  dg)  # the pipeline's (d) again, then the GPU tests, in one call
    timeout 200 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates "$N" > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; tail -2 "$OUT/d-pipeline.txt" | cut -c1-700
    timeout 320 $PYTEST -s tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|prefetched:|passed|failed" "$OUT/gpu-tests.txt" | tail -8
    ;;
  dga)  # the pipeline's (d), the GPU tests, then (a) for layer_norm, in one call of under 600 s
    timeout 150 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates "$N" > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; tail -2 "$OUT/d-pipeline.txt" | cut -c1-700
    timeout 200 $PYTEST -s tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|prefetched:|passed|failed" "$OUT/gpu-tests.txt" | tail -8
    timeout 210 python3 bench/evaluator.py --out "$OUT/a-layer-norm" --parts a --kernels layer_norm --runs "${RUNS:-3}" \
      > "$OUT/a-layer-norm.txt" 2>&1
    echo "layer_norm (a) rc=$?"; tail -12 "$OUT/a-layer-norm.txt" | cut -c1-300
    ;;
  next)
    timeout 330 $PYTEST -s tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|AssertionError|passed|failed" "$OUT/gpu-tests.txt" | tail -12
    timeout 150 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates 8 > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; python3 -c "import json,sys; rows=json.load(open(sys.argv[1]))['d']['rows']
for r in rows: print({k: round(v, 2) for k, v in r['phases'].items() if k.startswith(('correctness', 'timing'))})" \
      "$OUT/d-pipeline/evaluator.json"
    ;;
  g)
    timeout 300 $PYTEST tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu-tests.txt" | tail -8
    timeout 250 python3 bench/evaluator.py --out "$OUT/a-layer-norm" --parts a --kernels layer_norm --runs "${RUNS:-3}" \
      > "$OUT/a-layer-norm.txt" 2>&1
    echo "layer_norm (a) rc=$?"; tail -12 "$OUT/a-layer-norm.txt" | cut -c1-300
    ;;
esac
