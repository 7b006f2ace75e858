#!/usr/bin/env bash
# On a GPU machine: `kernelsmith optimize` on examples/sglite's embedding_lookup with `--backend triton`, whose
# captured cases replay the token ids the tests passed, in the judge's correctness inputs and in the workers'
# timing slots (SlotBank), then the report's capture summary and per-case rows.
#   DEST=/tmp/out bash bench/capture_values_gpu.sh
set -uo pipefail
DEST=${DEST:-runs/capture-values-gpu}
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$DEST"
DEST=$(realpath "$DEST")
work=$(mktemp -d)
cp -r examples/sglite "$work/sglite"
(cd "$work/sglite" && git init -q -b main && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm baseline)
(cd "$work/sglite" && python3 -m bot.cli optimize . --kernel embedding_lookup --backend "${BACKEND:-triton}" \
  --budget "${BUDGET:-4}" --out "$DEST/run" 2>&1 | grep -v '━' | tail -n 20)
python3 - "$DEST/run" <<'PY' | tee "$DEST/summary.txt"
import json, sys, pathlib
run = pathlib.Path(sys.argv[1])
report = json.loads((run / "report.json").read_text()) if (run / "report.json").exists() else {}
print("capture:", json.dumps(report.get("capture"), indent=1))
for row in (report.get("cases") or []):
    print(row.get("case"), row.get("correct"), row.get("baseline_us"), row.get("candidate_us"), row.get("speedup"))
print("recorded files:", sorted(p.name for p in (run / "bundle/recorded").glob("*.bin")))
PY
tar czf "$DEST/run.tar.gz" --exclude=bundle -C "$DEST" run
