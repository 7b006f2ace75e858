#!/usr/bin/env bash
# The engine on a GPU machine, in one call of at most OPTIMIZE_TIMEOUT + BENCH_TIMEOUT + SEED_TIMEOUT seconds (plus
# about 15 s of set-up and plotting); STEPS (default optimize,tuner,seed) picks the steps:
#  optimize: `kernelsmith optimize --models` on a fresh checkout of examples/tinyserve, softmax, with recorded LLM
#     answers (real rewrites and broken ones, tests/llm_server/scripts/softmax_h200.json) served by the loopback LLM
#     server: search, champion verification, repository test, PR report;
#  tuner: bench/engine_h200.py, the tuner for TUNER_BUDGET (default BUDGET) evaluations; best speedup against
#     evaluations spent for both paths, as a plot and a summary (a tuner cut short by BENCH_TIMEOUT keeps its curve);
#  seed: torch.compile's code for rms_norm's reference as the seed of LLM rewrites (SEED_TIMEOUT=0 skips it too).
# On an H200 one judge evaluation of softmax takes 30-50 s (12 cases); the optimize step is about
# 100 s + BUDGET x 40 s + 90 s (set-up and the baseline, the search, the champion's re-verification and the
# repository's test). One GPU, at most 8 minutes (about 7):
#   DEST=/tmp/out BUDGET=4 OPTIMIZE_TIMEOUT=360 BENCH_TIMEOUT=110 SEED_TIMEOUT=0 bash bench/engine_h200.sh
# The torch.compile seed alone (another GPU, about 4 minutes):
#   DEST=/tmp/out2 STEPS=seed SEED_TIMEOUT=240 bash bench/engine_h200.sh
set -uo pipefail
BUDGET=${BUDGET:-4}
DEST=${DEST:-runs/engine-h200}
STEPS=${STEPS:-optimize,tuner,seed}
step() { [[ ",$STEPS," == *",$1,"* ]]; }
say() { echo "== $* (${SECONDS} s since the start)"; }
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
if step optimize; then
  say "optimize: softmax, budget $BUDGET, limit ${OPTIMIZE_TIMEOUT:-360} s"
  cp -r examples/tinyserve "$work/tinyserve"
  (cd "$work/tinyserve" && git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline) || exit 1
  python3 tests/llm_server/server.py --script tests/llm_server/scripts/softmax_h200.json --port-file "$work/port" > /dev/null &
  server=$!
  for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
  printf 'models:\n  - {name: recorded-local, provider: openai, model: recorded, base_url: "http://127.0.0.1:%s/v1", timeout_s: 30, backoff_s: 0.05}\n' "$(cat "$work/port")" > "$work/models.yaml"
  (cd "$work/tinyserve" && timeout ${OPTIMIZE_TIMEOUT:-360} python3 -m bot.cli optimize . --kernel softmax --backend "${BACKEND:-triton}" \
    --budget "$BUDGET" --models "$work/models.yaml" --operators rewrite,diff --preset kernel-smith --seed 1 \
    --out "$DEST/optimize-llm" 2>&1 | grep -v '━' | tail -n 30)
  kill $server
  say "optimize: done"
fi

# The tuner for the same number of evaluations (the LLM curve comes from the optimize run's store; PATHS=tuner,llm
# runs the LLM path here too).
if step tuner; then
  say "tuner: budget ${TUNER_BUDGET:-$BUDGET}, limit ${BENCH_TIMEOUT:-110} s"
  timeout ${BENCH_TIMEOUT:-110} python3 bench/engine_h200.py --out "$DEST/bench" --budget "${TUNER_BUDGET:-$BUDGET}" \
    --backend "${BACKEND:-triton}" --paths "${PATHS:-tuner}" 2>&1 | grep -v "HTTP Request" > "$DEST/bench.log"
  tail -n 30 "$DEST/bench.log"
  say "tuner: done"
fi
if step optimize || step tuner; then
  mkdir -p "$DEST/bench"  # STEPS=optimize alone: the LLM curve only (the plot step used to fail without the folder)
  python3 bench/engine_h200.py --out "$DEST/bench" --plot-only --optimize-run "$DEST/optimize-llm"
  rm -rf "$DEST/bench/bundle" "$DEST/optimize-llm/bundle"
  cat "$DEST/bench/summary.md"
fi

# 3. torch.compile's Triton code as a seed: rms_norm's reference compiled by inductor in a subprocess (GPU only),
# then rewrites whose recorded answers port it, on two islands.
# seed/seed/inductor.json is inductor's output; search.json says what became of the seeds. SEED_TIMEOUT=0 skips it.
# On the interpreter, inductor's recorded CPU Triton output for the same reference stands in for the GPU's.
if step seed && [ "${SEED_TIMEOUT:-200}" != 0 ]; then
  say "seed: rms_norm from torch.compile's code, limit ${SEED_TIMEOUT:-200} s"
  recorded=(); [ "${BACKEND:-triton}" = interpret ] && recorded=(--inductor-code tests/engine/recorded/inductor_rms_norm_cpu.json)
  timeout "${SEED_TIMEOUT:-200}" python3 bench/engine_h200.py --out "$DEST/seed" --kernel rms_norm --budget 3 \
    --backend "${BACKEND:-triton}" --paths seed --inductor-timeout "${INDUCTOR_TIMEOUT:-90}" ${recorded[@]+"${recorded[@]}"} \
    --script tests/llm_server/scripts/rms_norm_seed.json 2>&1 | grep -v "HTTP Request" > "$DEST/seed.log"
  tail -n 12 "$DEST/seed.log"
  rm -rf "$DEST/seed/bundle"
  python3 -c 'import json, sys; print("torch.compile seed:", json.load(open(sys.argv[1]))["torch_compile"])' \
    "$DEST/seed/seed/search.json" 2>/dev/null || echo "torch.compile seed: the run did not finish"
  say "seed: done"
fi

# What to look at: every evaluated candidate's per-case speedups, and the verdict (the champion re-timed in a fresh
# worker, its held-out cases and the repository's test).
if step optimize; then
  say "optimize: the candidates and the verdict (optimize-llm/run.log, report.md)"
  grep -E "proposal .* rejected|candidate [0-9]+ \(|search stopped|verdict" "$DEST/optimize-llm/run.log" 2>/dev/null | cut -c 25-900
  python3 - "$DEST/optimize-llm" <<'PY' || true
import hashlib, json, sys
from pathlib import Path
run = Path(sys.argv[1])
report = json.loads((run / "report.json").read_text()) if (run / "report.json").exists() else None
if report is None:
    sys.exit(print("no report.json: the optimize step did not finish"))
print("verdict:", report.get("verdict"), report.get("reason") or "")
champion = report.get("champion") or {}
test = (report.get("correctness") or {}).get("repo_test") or {}
if champion:
    print(f"champion: candidate {champion['candidate_id']} ({champion['operator']}), re-verified geomean "
          f"{champion['geomean_speedup']:.3f}x; held-out cases {report['correctness']['held_out_cases']}; "
          f"repository test passed: {test.get('passed')} ({test.get('command')})")
for row in report.get("cases") or []:  # claimed_us set: the credit was capped at what the judge's clock saw
    print("  ", {k: row.get(k) for k in ("case", "baseline_us", "candidate_us", "speedup", "judge_us", "claimed_us")})
names = {hashlib.sha256(p.read_bytes()).hexdigest(): p.stem for p in Path("tests/llm_server/recorded/softmax").glob("*.py")}
names[hashlib.sha256(Path("examples/tinyserve/tinyserve/kernels/softmax.py").read_bytes()).hexdigest()] = "the baseline"
if (run / "candidates.jsonl").exists():  # which recorded answer each candidate is
    for line in (run / "candidates.jsonl").read_text().splitlines():
        c = json.loads(line)
        print(f"   candidate {c['id']} ({c['operator']}, parent {c['parent']}): "
              f"{names.get(c['sha256'], 'an edit of a recorded file')}, stage {c['evaluation']['stage']}, "
              f"fitness {c['fitness']}")
search = json.loads((run / "search.json").read_text()) if (run / "search.json").exists() else {}
print("best origin:", search.get("best_origin"))
PY
fi
