#!/usr/bin/env bash
# On a GPU machine: the GPU tests (timing, poisoning, timed-output checks, cheats), then one full
# `kernelsmith optimize --apply` with a low bar so that champion verification and --apply run on the GPU.
#   DEST=/tmp/out bash bench/gpu_checks.sh
set -uo pipefail
DEST=${DEST:-runs/gpu-checks}
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$DEST"
python3 -m pytest -v -m gpu tests/test_gpu.py -p no:cacheprovider 2>&1 | tee "$DEST/gpu-tests.txt" | tail -n 30
work=$(mktemp -d)
cp -r examples/tinyserve "$work/tinyserve"
(cd "$work/tinyserve" && git init -q -b main && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline)
DEST=$(realpath "$DEST")
(cd "$work/tinyserve" && python3 -m bot.cli optimize . --kernel "${KERNEL:-apply_rotary_pos_emb}" --backend triton \
  --budget "${BUDGET:-16}" --min-speedup "${MIN_SPEEDUP:-1.01}" --apply --out "$DEST/verify" 2>&1 | grep -v '━' | tail -n 20)
(cd "$work/tinyserve" && git log --oneline --all && git status --short && git show --stat HEAD~0 kernelsmith/* 2>/dev/null | head -20) | tee "$DEST/git-after-apply.txt"
tar czf "$DEST/verify.tar.gz" --exclude=bundle -C "$DEST" verify
