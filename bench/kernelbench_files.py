"""KernelBench's own task files through `kernelsmith kernelbench`'s first steps, on the CPU: each file read (its
inputs' shapes on the meta device), turned into a bundle, and its module passed through the judge's static
policy as the baseline. Nothing is timed; this says which real tasks the engine can take.

    python bench/kernelbench_files.py /path/to/KernelBench/KernelBench [--out results.md]
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evolver.kernelbench import ENTRY, build_bundle, load_task  # noqa: E402
from runners.policy import check_source  # noqa: E402


def check(path: Path) -> str:
    """'' when the file becomes a bundle whose baseline passes the policy, else why not."""
    try:
        task = load_task(path)
        with tempfile.TemporaryDirectory() as tmp:
            spec = build_bundle(task, Path(tmp))
            source = (Path(tmp) / "baseline" / spec.module).read_text()
            problems = check_source(source, source, ENTRY)
        return f"policy: {problems[0]}" if problems else ""
    except Exception as exc:  # noqa: BLE001 - a measurement: every failure is counted and named
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:150] if str(exc) else ''}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path, help="KernelBench's folder holding level1, level2, ...")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    counts: dict[str, collections.Counter] = {}
    failures = []
    for level in sorted(p for p in args.root.iterdir() if p.is_dir() and p.name.startswith("level")):
        counts[level.name] = collections.Counter()
        for path in sorted(level.glob("*.py")):
            why = check(path)
            counts[level.name]["ok" if not why else "failed"] += 1
            if why:
                failures.append(f"- {level.name}/{path.name}: {why}")
    lines = ["| level | files | bundles whose baseline passes the policy |", "| --- | ---: | ---: |"]
    lines += [f"| {lv} | {sum(c.values())} | {c['ok']} |" for lv, c in counts.items()]
    text = "\n".join(lines + (["", "Failures:", *failures] if failures else [])) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
