"""Import a kernel module the way a worker will, in the target's own Python, and say exactly what failed.

Run as a script (``python import_check.py``, one JSON job on stdin), so it needs nothing of kernelsmith: only
the standard library and whatever the kernel module imports. The copied files are placed under a throwaway
top-level package with empty ``__init__`` files, the import paths go first on ``sys.path``, and the module is
imported. The answer, one JSON line on stdout, keeps every traceback frame that lies in the target's files,
mapped back to paths relative to the repository root, so that a failure names the helper's file and line.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

PACKAGE = "ks_import_check"
MARKER = "KS-IMPORT-CHECK:"
_DEVICE_WORDS = ("cuda", "nvidia", "gpu", "driver", "device", "hip", "rocm", "nvml")


def _frames(exc: BaseException, tmp: Path, root: Path) -> list[dict]:
    out = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if not path.is_absolute() or not path.is_file():  # <frozen importlib._bootstrap> and the like
            continue
        for base in (tmp / PACKAGE, root):
            try:
                rel = path.resolve().relative_to(base.resolve())
            except ValueError:
                continue
            out.append({"file": rel.as_posix(), "line": frame.lineno, "function": frame.name,
                        "code": (frame.line or "").strip()})
            break
    return out


def _blame(frames: list[dict]) -> int:
    """The frame to name: the deepest one, unless it only raises an error for its caller (FlagGems'
    ``error.device_not_found()``), in which case the caller's line is what does the work."""
    i = len(frames) - 1
    while i > 0 and frames[i]["code"].startswith("raise ") and frames[i]["function"] != "<module>":
        i -= 1
    return max(i, 0)


def _kind(exc: BaseException, backend: str) -> str:
    if isinstance(exc, ModuleNotFoundError):
        return "missing_module"
    text = f"{type(exc).__name__} {exc}".lower()
    if backend == "interpret" and any(w in text for w in _DEVICE_WORDS):
        return "device_probe"
    return "error"


def check(job: dict) -> dict:
    root = Path(job["root"])
    tmp = Path(tempfile.mkdtemp(prefix="ks-import-check-"))
    try:
        for rel in job["files"]:
            dest = tmp / PACKAGE / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, dest)
        for d in [tmp / PACKAGE, *[p for p in (tmp / PACKAGE).rglob("*") if p.is_dir()]]:
            (d / "__init__.py").touch()
        sys.path[:0] = [str(tmp), *job.get("import_paths", [])]
        name = ".".join([PACKAGE, *Path(job["module"]).with_suffix("").parts])
        try:
            module = importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - anything the target raises at import is the answer
            frames = _frames(exc, tmp, root)
            return {"ok": False, "kind": _kind(exc, job["backend"]), "type": type(exc).__name__,
                    "message": str(exc)[:2000], "missing": getattr(exc, "name", None),
                    "frames": frames, "blame": _blame(frames)}
        entry = getattr(module, job["entry"], None)
        if not callable(entry):
            names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("__"))
            return {"ok": False, "kind": "bad_entry", "type": "AttributeError", "names": names,
                    "message": f"module has no callable `{job['entry']}`", "frames": []}
        return {"ok": True, "python": sys.executable, "version": sys.version.split()[0]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    job = json.loads(sys.stdin.readline())
    if job["backend"] == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"
        if job.get("shims"):  # as the workers import it: a stand-in Triton driver and list grids
            sys.path.append(str(Path(__file__).resolve().parent))
            import interpreter_shims

            interpreter_shims.install()
    result = check(job)
    sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: some engines hang or crash in their atexit hooks


if __name__ == "__main__":
    main()
