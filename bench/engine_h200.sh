#!/usr/bin/env bash
# The engine on a GPU machine, in one call of at most OPTIMIZE_TIMEOUT + BENCH_TIMEOUT + SEED_TIMEOUT seconds (plus set-up):
#  1. `kernelsmith optimize --models` on a fresh checkout of examples/tinyserve, softmax, with recorded LLM
#     answers (real rewrites and broken ones) served by the loopback LLM server: search, champion verification,
#     repository test, PR report;
#  2. bench/engine_h200.py: the tuner for the same number of evaluations; best speedup against evaluations
#     spent for both paths, as a plot and a summary;
#  3. torch.compile's code for rms_norm's reference as the seed of LLM rewrites (SEED_TIMEOUT=0 skips it).
#   DEST=/tmp/out BUDGET=6 bash bench/engine_h200.sh
set -uo pipefail
BUDGET=${BUDGET:-6}
DEST=${DEST:-runs/engine-h200}
cd "$(dirname "$0")/.."
if [ "${BACKEND:-triton}" = interpret ] && [ -x .venv/bin/python3 ]; then
  export PATH=$PWD/.venv/bin:$PATH SKIP_WHEELS=1  # the CPU check on a development checkout: its own venv
fi
if [ -d .whl ] && [ -z "${SKIP_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$DEST"; DEST=$(realpath "$DEST")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$DEST/device.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$DEST/device.txt"

work=$(mktemp -d) && chmod 755 "$work"  # readable by the candidates' user when kernelsmith runs as root
cp -r examples/tinyserve "$work/tinyserve"
(cd "$work/tinyserve" && git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline) || exit 1
python3 tests/llm_server/server.py --script tests/llm_server/scripts/softmax_h200.json --port-file "$work/port" > /dev/null &
server=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
printf 'models:\n  - {name: recorded-local, provider: openai, model: recorded, base_url: "http://127.0.0.1:%s/v1", timeout_s: 30, backoff_s: 0.05}\n' "$(cat "$work/port")" > "$work/models.yaml"
(cd "$work/tinyserve" && timeout ${OPTIMIZE_TIMEOUT:-150} python3 -m bot.cli optimize . --kernel softmax --backend "${BACKEND:-triton}" \
  --budget "$BUDGET" --models "$work/models.yaml" --operators rewrite,diff --preset kernel-smith --seed 1 \
  --out "$DEST/optimize-llm" 2>&1 | grep -v '━' | tail -n 30)
kill $server

# The tuner for the same number of evaluations (the LLM curve comes from the optimize run's store; PATHS=tuner,llm
# runs the LLM path here too).
timeout ${BENCH_TIMEOUT:-100} python3 bench/engine_h200.py --out "$DEST/bench" --budget "$BUDGET" --backend "${BACKEND:-triton}" --paths "${PATHS:-tuner}" 2>&1 \
  | grep -v "HTTP Request" > "$DEST/bench.log"
tail -n 30 "$DEST/bench.log"
python3 bench/engine_h200.py --out "$DEST/bench" --plot-only --optimize-run "$DEST/optimize-llm"
rm -rf "$DEST/bench/bundle" "$DEST/optimize-llm/bundle"
cat "$DEST/bench/summary.md"

# 3. torch.compile's Triton code as a seed: rms_norm's reference compiled by inductor in a subprocess (GPU only),
# then rewrites whose recorded answers port it, on two islands.
# seed/seed/inductor.json is inductor's output; search.json says what became of the seeds. SEED_TIMEOUT=0 skips it.
# On the interpreter, inductor's recorded CPU Triton output for the same reference stands in for the GPU's.
if [ "${SEED_TIMEOUT:-200}" != 0 ]; then
  recorded=(); [ "${BACKEND:-triton}" = interpret ] && recorded=(--inductor-code tests/engine/recorded/inductor_rms_norm_cpu.json)
  timeout "${SEED_TIMEOUT:-200}" python3 bench/engine_h200.py --out "$DEST/seed" --kernel rms_norm --budget 3 \
    --backend "${BACKEND:-triton}" --paths seed --inductor-timeout "${INDUCTOR_TIMEOUT:-90}" ${recorded[@]+"${recorded[@]}"} \
    --script tests/llm_server/scripts/rms_norm_seed.json 2>&1 | grep -v "HTTP Request" > "$DEST/seed.log"
  tail -n 12 "$DEST/seed.log"
  rm -rf "$DEST/seed/bundle"
  python3 -c 'import json, sys; print("torch.compile seed:", json.load(open(sys.argv[1]))["torch_compile"])' \
    "$DEST/seed/seed/search.json" 2>/dev/null || echo "torch.compile seed: the run did not finish"
fi
