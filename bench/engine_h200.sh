#!/usr/bin/env bash
# The engine on a GPU machine, in one call under five minutes: bench/engine_h200.py (tuner vs LLM path on
# softmax, recorded answers from the loopback LLM server), then `kernelsmith optimize --models` on a fresh
# checkout of examples/tinyserve for the PR report of an LLM rewrite.
#   DEST=/tmp/out BUDGET=10 bash bench/engine_h200.sh
set -uo pipefail
BUDGET=${BUDGET:-10}
DEST=${DEST:-runs/engine-h200}
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$DEST"; DEST=$(realpath "$DEST")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$DEST/device.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$DEST/device.txt"
timeout ${BENCH_TIMEOUT:-170} python3 bench/engine_h200.py --out "$DEST/bench" --budget "$BUDGET" 2>&1 | tee "$DEST/bench.log" | grep -v "HTTP Request"
# The same LLM path through the whole job: search, champion verification, repo test, report.
work=$(mktemp -d)
cp -r examples/tinyserve "$work/tinyserve"
(cd "$work/tinyserve" && git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline) || exit 1
python3 tests/llm_server/server.py --script tests/llm_server/scripts/softmax_h200.json --port-file "$work/port" &
server=$!
sleep 1
printf 'models:\n  - {name: recorded-local, provider: openai, model: recorded, base_url: "http://127.0.0.1:%s/v1", timeout_s: 30, backoff_s: 0.05}\n' "$(cat "$work/port")" > "$work/models.yaml"
(cd "$work/tinyserve" && timeout ${OPTIMIZE_TIMEOUT:-100} python3 -m bot.cli optimize . --kernel softmax --backend triton \
  --budget 6 --models "$work/models.yaml" --operators rewrite,diff --seed 1 --out "$DEST/optimize-llm" 2>&1 | grep -v '━' | tail -n 30)
kill $server
rm -rf "$DEST/bench/bundle" "$DEST/optimize-llm/bundle"
ls -R "$DEST" | head -50
