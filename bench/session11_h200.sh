#!/usr/bin/env bash
# The eleventh session's H200 calls (one GPU, nvidia-h200; carry [".whl"]): OUT=$OUT STEP=diag|d bash bench/session11_h200.sh
#   diag: the baseline against itself on RMSNorm in fresh evaluators (bench/judge_diag.py), the default protocol three
#         times and samples four times longer twice: the tenth session's first GPU test read 1.034 at T=512,H=4096
#         bfloat16 with an interquartile spread of 8.5 % a side;
#   lead: after the diag, each sample starts behind a device sleep (Protocol.sample_lead_cycles): the default protocol
#         and the long samples twice each, then the GPU test of the baseline against itself;
#   d:    (d) on RMSNorm with the correctness phase's parts and the window's (timing.window_reveal holds the openings).
source "$(dirname "$0")/device_setup.sh"
case "${STEP:-diag}" in
  diag)
    timeout 480 python3 bench/judge_diag.py rms_norm default,long-samples,default,long-samples,default \
      > "$OUT/diag.txt" 2>&1; echo "diag rc=$?"
    grep -oE "^[a-z-]+ +T=[^ ]+ +self-speedup [0-9.]+ med [0-9. /]+ spread [0-9./]+" "$OUT/diag.txt"
    ;;
  lead)
    timeout 400 python3 bench/judge_diag.py rms_norm default,long-samples,default,long-samples > "$OUT/diag-lead.txt" 2>&1
    echo "diag rc=$?"
    grep -oE "^[a-z-]+ +T=[^ ]+ +self-speedup [0-9.]+ med [0-9. /]+ spread [0-9./]+" "$OUT/diag-lead.txt"
    timeout 120 $PYTEST -s tests/test_gpu.py -k against_itself > "$OUT/gpu-self.txt" 2>&1
    echo "gpu test rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu-self.txt" | tail -3
    ;;
  d)
    timeout 200 python3 bench/evaluator.py --out "$OUT/d-pipeline" --parts d --candidates 8 > "$OUT/d-pipeline.txt" 2>&1
    echo "pipeline rc=$?"; tail -2 "$OUT/d-pipeline.txt" | cut -c1-700
    python3 -c "import json,sys; rows=json.load(open(sys.argv[1]))['d']['rows']
for r in rows: print({k: round(v, 2) for k, v in r['phases'].items() if k.startswith(('correctness', 'timing'))})" \
      "$OUT/d-pipeline/evaluator.json"
    ;;
esac
