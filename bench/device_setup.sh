# Sourced by the session scripts on the GPU machine (no package index there): the carried wheels into /tmp/site,
# the environment, and $OUT/environment.txt (date, GPU, driver, versions, cores, commit). Needs OUT and a .whl folder.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:?a folder for the results}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site SKIP_WHEELS=1 PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  echo "cores $(nproc)"; grep -H . /sys/devices/system/cpu/vulnerabilities/{spec_store_bypass,spectre_v2} 2>/dev/null
  git log --format='kernelsmith %H %s' -1 2>/dev/null; } > "$OUT/environment.txt" 2>&1
PYTEST="python3 -m pytest -v -rA --tb=short -m gpu -p no:cacheprovider --timeout=150"
