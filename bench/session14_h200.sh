#!/usr/bin/env bash
# The H200 calls (one GPU, nvidia-h200; carry [".whl"]): OUT=$OUT STEP=first|gpu|chk|d|dshort|pins|a|first,d bash bench/session14_h200.sh
# (The twelfth and thirteenth sessions had no device time left: their steps are here. STEP takes a comma list.)
#   first: what the eleventh and twelfth sessions changed without a GPU: the ranged plan's blocks of rows captured on
#          CUDA (bench/commit_check_gpu.py), the judge's checkpoints between the window's calls (captured with the
#          calls, the fill not waiting for the device, round 4's two cheats and round 16's GPU forms);
#   gpu:   tests/test_gpu.py whole (the sample lead, the checkpoints' cost taken off both passes at decode sizes, the
#          chunks' whole-error check on honest kernels, the one-layout screening, the finfo.min masked trial);
#   chk:   the checkpoints' cost on the judge's clock: RMSNorm's baseline against itself with none, the default and
#          one after every call (bench/judge_diag.py; the window's parts show the checkpoints' time alone);
#   d:     (d) on RMSNorm with the correctness phase's parts (the layout trials were 3.8 s of 7.4 s before screening
#          tried one layout a case);
#   a:     (a) with the sample lead on every example kernel (RUNS, default 3; the eleventh session measured RMSNorm).
# The next session, in order (the fourteenth had 262 s left for its last call, cut before any result):
#   1. STEP=pins,dshort PINS_S=150 D_S=300 CANDIDATES=8: the bundle's autotune pins on LayerNorm; (d) with the paired
#      trials and the worker's parts of each call (why the candidate's trial calls cost 2.6x the oracle's);
#   2. STEP=a RUNS=2 KERNELS=softmax,layer_norm: the window's host time (host_us) beside its walls, and LayerNorm's
#      bfloat16 medians with the pins (bench/clock_credit.py reads both);
#   3. STEP=gpu, then STEP=chk.
source "$(dirname "$0")/device_setup.sh"
for step in ${STEP//,/ }; do
case "$step" in
  first)
    timeout 60 python3 bench/commit_check_gpu.py > "$OUT/commit-check.json" 2>&1; echo "commit check rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if k != 'checks'}, \
all(d['checks'].values()))" "$OUT/commit-check.json"
    timeout ${FIRST_S:-480} $PYTEST tests/test_checkpoints.py tests/test_judge_attacks_round4.py tests/test_judge_attacks_round16.py \
      -k "checkpoints or deferred or ahead or round16" > "$OUT/checkpoint-tests.txt" 2>&1
    echo "checkpoint tests rc=$?"; grep -E "^(FAILED|ERROR|XPASS)|passed|failed" "$OUT/checkpoint-tests.txt" | cut -c1-300 | tail -8
    ;;
  gpu)
    timeout 560 $PYTEST -s tests/test_gpu.py > "$OUT/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$?"; grep -E "^(FAILED|ERROR)|AssertionError|passed|failed" "$OUT/gpu-tests.txt" | cut -c1-400 | tail -12
    ;;
  chk)
    timeout 560 python3 bench/judge_diag.py rms_norm no-checkpoints,default,every-call > "$OUT/diag-checkpoints.txt" 2>&1
    echo "diag rc=$?"; cut -c1-220 "$OUT/diag-checkpoints.txt" | tail -30
    ;;
  d)
    timeout 200 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates 8 > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; tail -2 "$OUT/d-pipeline.txt" | cut -c1-700
    python3 -c "import json,sys; rows=json.load(open(sys.argv[1]))['d']['rows']
for r in rows: print({k: round(v, 2) for k, v in r['phases'].items() if k.startswith(('correctness', 'timing'))})" \
      "$OUT/d-pipeline/evaluator.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['d']; print(d['per_minute'], d['requests_s_per_candidate'])" \
      "$OUT/d-pipeline/evaluator.json"
    ;;
  dshort)  # (d) on a few candidates with the worker's parts of each call, the trials paired behind the uid wall
    timeout "${D_S:-90}" python3 bench/evaluator.py --out "$OUT/d-short" --parts d --candidates "${CANDIDATES:-3}" \
      > "$OUT/d-short.txt" 2>&1; echo "(d) rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['d']; print(round(d['per_minute'], 2), round(d['mean_s'], 2),
{k: round(v, 2) for k, v in d['phases_mean_s'].items() if k.startswith('correctness')}); r=d['requests_s_per_candidate']
print({k: v for k, v in r.items() if '.call.' in k})" "$OUT/d-short/evaluator.json"
    ;;
  pins)
    timeout "${PINS_S:-50}" $PYTEST tests/test_autotune_judge.py -k gpu > "$OUT/pins.txt" 2>&1
    echo "pins rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/pins.txt" | cut -c1-300 | tail -6
    ;;
  a)
    timeout "${A_S:-560}" python3 bench/evaluator.py --out "$OUT/a-all" --parts a --runs "${RUNS:-3}" \
      ${KERNELS:+--kernels "$KERNELS"} > "$OUT/a-all.txt" 2>&1
    echo "(a) rc=$?"; tail -30 "$OUT/a-all.txt" | cut -c1-300
    ;;
esac
done
