"""Print one line per run folder: verdict, geometric-mean speedup and per-case speedups (for device logs)."""
import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
print("| kernel | verdict | geomean | evaluated | failed | per-case speedups |")
print("| --- | --- | ---: | ---: | ---: | --- |")
for report_path in sorted(root.glob("*/report.json")):
    r = json.loads(report_path.read_text())
    geo = r["champion"]["geomean_speedup"] if r["champion"] else r["search"].get("best_fitness")
    cases = ", ".join(f"{c['case']} {c['speedup']:.2f}x" for c in r["cases"] if c.get("speedup"))
    print(f"| {r['kernel']} | {r['verdict']} | {geo or 0:.3f} | {r['search']['evaluated']} | "
          f"{r['search']['failures']} | {cases} |")
