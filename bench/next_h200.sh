#!/usr/bin/env bash
# What is still to be measured on the H200 (issues 5 and 6), in one device call on `nvidia-h200-x2`, about 560 s:
#   GPU 0: Liger-Kernel's swiglu_forward end to end (budget 2, ~420 s), then the GPU cheats through the judge;
#   GPU 1: Liger-Kernel's liger_dyt_fwd end to end (its tests' capture run autotunes 18 configs: ~3 min more).
# Carry: [".whl", ".ext/Liger-Kernel"]. Run from the repository root:
#   OUT=$OUT bash bench/next_h200.sh
# The results come back as $OUT/track0.tar.gz and $OUT/track1.tar.gz (bench/two_gpu.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
export TRACK0='REPO=.ext/Liger-Kernel KERNELS=swiglu_forward LN_BUDGET=0 BUDGET=2 PER_KERNEL=440 PACK=$DEST/liger bash bench/real_repo_gpu.sh; python3 bench/judge_attacks_gpu.py --out $DEST/attacks --timeout 120'
export TRACK1='REPO=.ext/Liger-Kernel KERNELS=liger_dyt_fwd LN_BUDGET=0 BUDGET=2 PER_KERNEL=560 PACK=$DEST/liger bash bench/real_repo_gpu.sh'
LIMIT=${LIMIT:-565} bash bench/two_gpu.sh
