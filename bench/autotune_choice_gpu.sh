#!/usr/bin/env bash
# The config chosen by row count against the autotuned baseline and every single pinned config, on the example's
# QK-norm (issue 6, "a shape-dependent choice"): bench/autotune_choice_gpu.py in one evaluator on one GPU, the
# configured shapes (decode T=1,H=32 and prefill T=8192,H=32 / H=8; fp16 and bf16), the search protocol, then the
# choice again under the full protocol. Results in $OUT: autotune-choice.json, choice_candidate.py, console.txt,
# environment.txt. Exit status 0: the choice beat the baseline (>= 1.03x geometric mean) and every pin.
#   OUT=$OUT bash bench/autotune_choice_gpu.sh   # carry [".whl"]; one GPU; 12 evaluations, estimated 5-8 minutes
#   PINS=4 shortens it (the 4 farthest-first pins); REKEY=1 adds the bucketed re-key (the autotuner's own answer,
#   ~80-130 s more); VERIFY=0 leaves out the full-protocol run; BACKEND=interpret REPLAY=1 dry-runs it on a CPU with
#   the H200's recorded times (about 40 s). The JSON is rewritten after each evaluation: a run cut by LIMIT keeps
#   what it measured.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=$(realpath -m "${OUT:-runs/autotune-choice}")
BACKEND=${BACKEND:-triton}
mkdir -p "$OUT"
if [ -d .whl ] && [ "$BACKEND" = triton ] && [ -z "${SKIP_WHEELS:-}" ]; then  # no package index on the GPU machine
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  $PY -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  git log --format='kernelsmith %H %s' -1
} > "$OUT/environment.txt" 2>&1
args=(--out "$OUT" --backend "$BACKEND" --pins "${PINS:-0}")
[ "${REKEY:-0}" = 0 ] && args+=(--no-rekey)
[ "${VERIFY:-1}" = 1 ] && args+=(--verify)
[ -n "${REPLAY:-}" ] && args+=(--replay-h200)  # dry runs on a CPU only: the H200's recorded times
timeout "${LIMIT:-580}" $PY bench/autotune_choice_gpu.py "${args[@]}" 2>&1 | tee "$OUT/console.txt" | tail -n 25
exit "${PIPESTATUS[0]}"
