#!/usr/bin/env bash
# One device call, two GPUs: TRACK0 runs on GPU 0 and TRACK1 on GPU 1 at the same time (each a shell command
# line, each under LIMIT seconds), after the carried wheels are installed once. Every track writes under
# $RES/trackN; at the end each is packed into $OUT/trackN.tar.gz with its console log beside it, so that a
# track cut short still returns what it finished. On a machine of one GPU the tracks run one after the other on
# it (LIMIT each): give one track per call there.
#   TRACK0='bash bench/evaluator_gpu.sh' TRACK1='...' LIMIT=520 OUT=/tmp/out bash bench/two_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?a folder for the results}
LIMIT=${LIMIT:-520}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site SKIP_WHEELS=1
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
RES=$(mktemp -d) && chmod 755 "$RES"
export RES
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpus.txt"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
track() {  # track N COMMAND (on a one-GPU machine every track runs on GPU 0, one after another)
  mkdir -p "$RES/track$1" && chmod 755 "$RES/track$1"
  local dev=$1; [ "$NGPU" -lt 2 ] && dev=0
  CUDA_VISIBLE_DEVICES=$dev DEST=$RES/track$1 timeout --kill-after=10 "$LIMIT" bash -c "$2" > "$RES/track$1/console.txt" 2>&1
  echo "track $1: exit $? after $SECONDS s" | tee -a "$RES/track$1/console.txt"
}
if [ "$NGPU" -lt 2 ]; then
  [ -n "${TRACK0:-}" ] && track 0 "$TRACK0"
  [ -n "${TRACK1:-}" ] && track 1 "$TRACK1"
else
  [ -n "${TRACK0:-}" ] && track 0 "$TRACK0" &
  [ -n "${TRACK1:-}" ] && track 1 "$TRACK1" &
  wait
fi
for n in 0 1; do
  [ -d "$RES/track$n" ] || continue
  tail -c 6000 "$RES/track$n/console.txt" > "$OUT/track$n.txt"
  tar czf "$OUT/track$n.tar.gz" --exclude=bundle --exclude=champion -C "$RES" "track$n"
done
ls -la "$OUT"
