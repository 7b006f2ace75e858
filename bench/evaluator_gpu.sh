#!/usr/bin/env bash
# On a GPU machine: the GPU tests of the judge (cheats at serving sizes, honest candidates), then
# bench/evaluator.py. Results go to $DEST (default runs/evaluator-gpu).
#   PARTS=a,b,c,d RUNS=5 PAIRS=100 TESTS="tests/test_gpu.py tests/test_gpu_attacks.py" DEST=/tmp/out bash bench/evaluator_gpu.sh
set -uo pipefail
DEST=${DEST:-runs/evaluator-gpu}
cd "$(dirname "$0")/.."
if [ -d .whl ] && [ -z "${SKIP_WHEELS:-}" ]; then  # wheels carried to a machine without a registry (see the device notes in README)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$DEST"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
if [ -n "${TESTS-tests/test_gpu.py tests/test_gpu_attacks.py}" ]; then
  python3 -m pytest -v -rA --tb=short ${PYTEST_ARGS:-} -m gpu ${TESTS-tests/test_gpu.py tests/test_gpu_attacks.py} -p no:cacheprovider 2>&1 \
    | tee "$DEST/gpu-tests.txt" | tail -n 25
fi
if [ -n "${PARTS:-a,b,c,d}" ]; then
  python3 bench/evaluator.py --out "$DEST" --parts "${PARTS:-a,b,c,d}" --runs "${RUNS:-5}" --pairs "${PAIRS:-100}" \
    --candidates "${CANDIDATES:-30}" ${EVAL_ARGS:-}
fi
