#!/usr/bin/env bash
# Creates .venv and installs kernelsmith with its test extras. Without a GPU it installs the CPU build of
# torch first (a plain `torch` requirement would pull a CUDA build of several GB). Where the CPU build is
# not on your default index, point KS_TORCH_INDEX at your platform's CPU wheel index.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "${pip[@]}" torch
  else
    "${pip[@]}" "torch==${KS_TORCH_VERSION:-2.13.0}" ${KS_TORCH_INDEX:+--index-url "$KS_TORCH_INDEX"}
  fi
fi
"${pip[@]}" -e ".[test]"
.venv/bin/python -c "import torch, triton; print(f'kernelsmith ready: torch {torch.__version__}, triton {triton.__version__}, GPU: {torch.cuda.is_available()}')"
