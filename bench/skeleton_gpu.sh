#!/usr/bin/env bash
# Runs `kernelsmith optimize --backend triton` on every example kernel on a GPU machine, on a fresh git
# checkout of examples/tinyserve, and packs the run folders (without bundles) into $DEST/runs.tar.gz.
#   KERNELS="rms_norm softmax" BUDGET=24 DEST=/tmp/out bash bench/skeleton_gpu.sh
set -uo pipefail
BUDGET=${BUDGET:-24}
KERNELS=${KERNELS:-"rms_norm silu_and_mul apply_rotary_pos_emb softmax"}
DEST=${DEST:-runs/skeleton-gpu}
cd "$(dirname "$0")/.."
if [ -d .whl ]; then  # wheels carried to a machine without a registry (see the device notes in README)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
work=$(mktemp -d)
cp -r examples/tinyserve "$work/tinyserve"
(cd "$work/tinyserve" && git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline) || exit 1
mkdir -p "$DEST"
DEST=$(realpath "$DEST")
for k in $KERNELS; do  # from inside the checkout, so that the reports' reproduce commands read `optimize .`
  (cd "$work/tinyserve" && python3 -m bot.cli optimize . --kernel "$k" --backend triton --budget "$BUDGET" \
    --out "$DEST/$k" --overwrite 2>&1 | grep -v '━' | tail -n 25)
done
python3 bench/summarize_runs.py "$DEST" | tee "$DEST/summary.md"
tar czf "$DEST/runs.tar.gz" --exclude=bundle -C "$DEST" $KERNELS summary.md
