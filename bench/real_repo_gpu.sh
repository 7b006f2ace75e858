#!/usr/bin/env bash
# kernelsmith on a real repository as it is: a git checkout carried to the GPU machine (REPO, holding its
# .github/kernelsmith.yml), optimised kernel by kernel from its own tests and the captured calls, after the
# example's autotuned LayerNorm. Each run folder is packed (without bundles and champion copies) into
# $PACK/<kernel>.tar.gz as soon as it ends, so that a run cut short still returns what finished.
#   REPO=.ext/Liger-Kernel KERNELS="swiglu_forward geglu_forward liger_dyt_fwd" PACK=$OUT bash bench/real_repo_gpu.sh
# PARALLEL=1 runs every kernel at the same time on the one GPU (their timings then share it).
set -uo pipefail
cd "$(dirname "$0")/.."
KS=$PWD
REPO=$(realpath "${REPO:?a checkout of the target repository}")
KERNELS=${KERNELS:?kernel names from the target config}
BUDGET=${BUDGET:-5}
LN_BUDGET=${LN_BUDGET:-6}
PER_KERNEL=${PER_KERNEL:-450}  # budget 2 on a Liger kernel: baseline 113 s, two candidates, verification (results README)
BACKEND=${BACKEND:-triton}
PY=${PY:-python3}
DEST=$(mktemp -d)
PACK=$(realpath -m "${PACK:-runs/real-repo}")
mkdir -p "$PACK"
if [ -d .whl ] && [ "$BACKEND" = triton ] && [ -z "${SKIP_WHEELS:-}" ]; then  # wheels carried to a machine without a package index
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$KS${PYTHONPATH:+:$PYTHONPATH}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  $PY -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  $PY -c 'import transformers; print("transformers", transformers.__version__)' 2>&1 | tail -1
  git -C "$REPO" log --format='target %H %s' -2
} > "$PACK/environment.txt" 2>&1

optimize() {  # optimize <checkout> <kernel> <budget>
  local t0=$SECONDS
  # Five seconds before the limit, every kernelsmith process prints its stacks (faulthandler on SIGUSR1) and
  # the workers' logs are kept: a run cut short says where it was.
  (sleep $((PER_KERNEL - 5)); pid=$(pgrep -f "^$PY -m bot.cli optimize . --kernel $2 .*--out $DEST/$2 " | head -1)
   # this kernel's processes only (not timeout, not another run on the machine): the CLI and its workers
   [ -n "$pid" ] && { pkill -USR1 -P "$pid" -f runners.worker; kill -USR1 "$pid"; }; sleep 2
   mkdir -p "$DEST/$2"; tail -n 60 /dev/shm/ks-judge-*/*/worker.log > "$DEST/$2/stuck-workers.txt" 2>&1) &
  local watcher=$!
  (cd "$1" && timeout "$PER_KERNEL" $PY -m bot.cli optimize . --kernel "$2" --backend "$BACKEND" --budget "$3" \
    --out "$DEST/$2" --overwrite > "$DEST/$2.console.txt" 2>&1)
  echo "$2: exit $? after $((SECONDS - t0)) s" >> "$PACK/timings.txt"
  pkill -P $watcher 2>/dev/null; kill $watcher 2>/dev/null  # its sleep too: a stale watcher signalled the next kernel
  mkdir -p "$DEST/$2"
  tr '\r' '\n' < "$DEST/$2.console.txt" | grep -v '━' > "$DEST/$2/console.txt"
  [ -f "$DEST/$2/candidates.jsonl" ] && $PY bench/autotune_findings.py "$DEST/$2" > "$DEST/$2/autotune-findings.json" 2>&1
  tar czf "$PACK/$2.tar.gz" --exclude=bundle --exclude=champion -C "$DEST" "$2"
}

ex=$(mktemp -d) && chmod 755 "$ex"  # readable by the candidates' user when kernelsmith runs as root
cp -r examples/tinyserve "$ex/tinyserve"
(cd "$ex/tinyserve" && git init -q -b main && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline)
if [ "$LN_BUDGET" = 0 ]; then :  # LN_BUDGET=0: the target's kernels only
elif [ -n "${PARALLEL:-}" ]; then optimize "$ex/tinyserve" layer_norm "$LN_BUDGET" & else optimize "$ex/tinyserve" layer_norm "$LN_BUDGET"; fi

work=$(mktemp -d) && chmod 755 "$work"  # the import root is on the candidate workers' sys.path
cp -r "$REPO" "$work/repo"  # with its .git: kernelsmith works through worktrees of it
for k in $KERNELS; do
  if [ -n "${PARALLEL:-}" ]; then optimize "$work/repo" "$k" "$BUDGET" & else optimize "$work/repo" "$k" "$BUDGET"; fi
done
wait
cat "$PACK/timings.txt"
