#!/usr/bin/env bash
# The H200 calls (one GPU, nvidia-h200; carry [".whl"]): OUT=$OUT STEP=<comma list> bash bench/h200_session.sh
#   first: the ranged plan of the commitments captured on CUDA (bench/commit_check_gpu.py), the checkpoints' GPU tests;
#   gpu:   tests/test_gpu.py whole;
#   chk:   the checkpoints' cost on the judge's clock (bench/judge_diag.py rms_norm, none / default / every call);
#   d:     (d) on RMSNorm, 8 candidates, with the correctness phase's parts;
#   dshort: (d) on CANDIDATES (3) with the worker's parts of each call, the trials paired behind the uid wall;
#   pins:  the bundle's autotune pins on LayerNorm (tests/test_autotune_judge.py -k gpu);
#   parts: the window's fill and commitment against what they replaced (bench/window_fill_gpu.py, commit_check_gpu.py);
#   noise: the judge's clock over ten rounds a side, quiet window and not (bench/judge_diag.py layer_norm, NOISE_VARIANTS);
#   profile: the host steps of a window's fill and commitment (bench/window_profile_gpu.py)
#   warmth: the window's parts after an idle gap and a warm-up (bench/window_warmth_gpu.py)
#   spread: the workers' sample spreads under test_gpu's and part (a)'s evaluators (bench/sample_spread_gpu.py)
#   tests: the test files in TESTS, the -k filter in K (GPU-marked or not), printed with -s
#   placement: RMSNorm's T=1 samples over fresh slot banks in one process, two modules (bench/placement_gpu.py)
#   hold:  each bank kept and sampled again later, in HOLD_PROCS fresh processes (placement_gpu.py HOLD=1)
#   between: one event between two samplings of one bank, per EVENTS, each in a fresh process (placement_gpu.py HOLD=2)
#   gap:   where an honest candidate's window is longer than the oracle's, part by part (bench/clock_gap_gpu.py GAP)
#   a:     (a) on KERNELS (all) with RUNS (3) fresh evaluators.
# Next session: 1. STEP=a RUNS=5 A_S=560 (part (a) with the pass in graphs of 256)  2. STEP=tests TESTS=tests/test_gpu_attacks.py
#   3. STEP=tests TESTS="tests/test_syscalls.py tests/test_judge_attacks_round32.py" K="syscalls or gpu"  4. STEP=dshort D_S=220 CANDIDATES=4
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
  tests)
    timeout "${TESTS_S:-300}" python3 -m pytest -v -rA --tb=short -s -p no:cacheprovider --timeout=150 $TESTS ${K:+-k "$K"} \
      > "$OUT/tests.txt" 2>&1
    echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|AssertionError|passed|failed|^self:| self: " "$OUT/tests.txt" | cut -c1-900 | tail -14
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
  parts)  # the window's fill and commitment, new against old, and their integers against the CPU's
    timeout 120 python3 bench/commit_check_gpu.py > "$OUT/commit-check.json" 2> "$OUT/commit-check.err"; echo "commit check rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if k not in ('checks', 'in place blocks')}, \
all(d['checks'].values()), [k for k, v in d['checks'].items() if not v])" "$OUT/commit-check.json" | cut -c1-900
    timeout 150 python3 bench/window_fill_gpu.py "$OUT/window-fill.json" > "$OUT/window-fill.txt" 2>&1; echo "fill rc=$?"
    cut -c1-220 "$OUT/window-fill.txt" | tail -8
    ;;
  noise)
    DIAG_SHAPES='[{"M": 512, "N": 4096}, {"M": 8192, "N": 4096}]' timeout "${NOISE_S:-400}" python3 bench/judge_diag.py \
      layer_norm "${NOISE_VARIANTS:-rounds10,rounds10-loud}" > "$OUT/noise.txt" 2>&1
    echo "noise rc=$?"; cut -c1-200 "$OUT/noise.txt" | tail -10
    ;;
  gap)  # the candidate's window parts less the oracle's, baseline against itself, T=1 (bench/clock_gap_gpu.py)
    { lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|NUMA)"; nvidia-smi topo -m 2>&1 | head -4; } > "$OUT/topology.txt" 2>&1
    cat "$OUT/topology.txt"
    timeout "${GAP_S:-300}" python3 bench/clock_gap_gpu.py "$OUT/clock-gap.json" "${GAP:-default,default,lead3ms}" \
      > "$OUT/clock-gap.txt" 2>&1; echo "gap rc=$?"; cut -c1-330 "$OUT/clock-gap.txt" | tail -24
    ;;
  profile)  # each host step of the window's fill and commitment, round after round (bench/window_profile_gpu.py)
    timeout "${PROFILE_S:-200}" python3 bench/window_profile_gpu.py "${PROFILE_ROUNDS:-10}" > "$OUT/window-profile.txt" 2>&1
    echo "profile rc=$?"; cut -c1-200 "$OUT/window-profile.txt" | tail -60
    ;;
  warmth)  # the window's parts after an idle gap and a warm-up of a given length (bench/window_warmth_gpu.py)
    timeout "${WARMTH_S:-200}" python3 bench/window_warmth_gpu.py "${WARMTH_ROUNDS:-8}" > "$OUT/window-warmth.txt" 2>&1
    echo "warmth rc=$?"; cut -c1-220 "$OUT/window-warmth.txt" | tail -16
    ;;
  spread)  # the workers' sample spreads, the baseline against itself, test_gpu's evaluator and part (a)'s
    timeout "${SPREAD_S:-300}" python3 bench/sample_spread_gpu.py "$OUT/sample-spread.json" > "$OUT/sample-spread.txt" 2>&1
    echo "spread rc=$?"; cut -c1-160 "$OUT/sample-spread.txt" | tail -40
    ;;
  placement)
    timeout "${PLACEMENT_S:-200}" python3 bench/placement_gpu.py "$OUT/placement.json" > "$OUT/placement.txt" 2>&1
    echo "placement rc=$?"; grep -E "max/min|Error" "$OUT/placement.txt" | cut -c1-160 | tail -12
    ;;
  hold)  # each preparation's bank kept and sampled again, in HOLD_PROCS fresh processes (bench/placement_gpu.py HOLD=1)
    for i in $(seq "${HOLD_PROCS:-3}"); do
      HOLD=1 timeout "${HOLD_S:-100}" python3 bench/placement_gpu.py "$OUT/hold-$i.json" > "$OUT/hold-$i.txt" 2>&1
      echo "hold $i rc=$?"; grep -E "prep|Error" "$OUT/hold-$i.txt" | cut -c1-160 | tail -16
    done
    ;;
  between)  # what ends a process's first fast reading: one event between two samplings (placement_gpu.py HOLD=2)
    for e in ${EVENTS:-sleep graph alloc bank prep}; do
      HOLD=2 EVENT=$e timeout 60 python3 bench/placement_gpu.py "$OUT/between-$e.json" > "$OUT/between-$e.txt" 2>&1
      echo "between $e rc=$?"; grep -E "before|Error" "$OUT/between-$e.txt" | cut -c1-160 | tail -3
    done
    ;;
  a)
    timeout "${A_S:-560}" python3 bench/evaluator.py --out "$OUT/a-all" --parts a --runs "${RUNS:-3}" \
      ${KERNELS:+--kernels "$KERNELS"} > "$OUT/a-all.txt" 2>&1
    echo "(a) rc=$?"; tail -30 "$OUT/a-all.txt" | cut -c1-300
    ;;
esac
done
