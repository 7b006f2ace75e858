"""Run in a subprocess: compile the config's torch reference with torch.compile and write the code inductor
generated for it, as JSON, to a file.

    python -m evolver.inductor_capture BUNDLE OUT_JSON [--spec TASK_JSON] [--case ID] [--cpu-triton]

Imports only the standard library, torch and runners (it may run in the target's own Python). Inductor
emits Triton only for a GPU, so the reference runs on CUDA. The code is caught at inductor's
``GraphLowering.save_output_code`` hook, as torch's ``run_and_get_code`` does, so it is kept even when running
it fails afterwards. ``--cpu-triton`` is for machines without a GPU (tests, recordings): inductor's Triton
backend for the CPU generates the code and nothing runs; it patches one more torch internal (the backend
hash needs a Triton driver) and may stop working with another torch.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path


def _case(spec, wanted: str | None):
    """The wanted case, else the one with the most tensor elements (where tiling matters most)."""
    from runners.inputs import case_shapes

    if wanted:
        for case in spec.cases:
            if case.id == wanted:
                return case
        raise ValueError(f"no case {wanted!r}")

    def size(case) -> int:
        total = 0
        for shape in case_shapes(spec.args, case).values():
            n = 1
            for d in shape:
                n *= d
            total += n
        return total

    return max(spec.cases, key=size)


def _reference(bundle: Path, reference: str):
    from runners.task import REFERENCE_DIR

    file, func = reference.split(":")
    path = bundle / REFERENCE_DIR / file
    mod_spec = importlib.util.spec_from_file_location("ks_reference", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return getattr(module, func)


def _capture(fn, kwargs: dict, cpu_triton: bool) -> tuple[list[str], str]:
    """Inductor's output modules for ``fn(**kwargs)``, caught where inductor saves them (as torch's own
    ``run_and_get_code`` does), and the error if running them failed after they were generated."""
    import torch
    from torch._inductor.graph import GraphLowering

    if cpu_triton:
        import torch._inductor.config as config
        import torch.utils._triton as torch_triton

        config.cpu_backend = "triton"
        torch_triton.triton_hash_with_backend = lambda: "0" * 64  # needs a driver; only a cache key
    codes: list[str] = []
    original = GraphLowering.__dict__["save_output_code"]
    GraphLowering.save_output_code = staticmethod(codes.append)
    try:
        torch._dynamo.reset()
        torch.compile(fn, dynamic=False)(**kwargs)
        return codes, ""
    except Exception as exc:  # noqa: BLE001 - the code may have been generated before the run failed
        if not codes:
            raise
        return codes, f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        GraphLowering.save_output_code = original


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--spec", type=Path, help="the TaskSpec as JSON (default: the bundle's task.yaml)")
    parser.add_argument("--case")
    parser.add_argument("--cpu-triton", action="store_true")
    args = parser.parse_args(argv)
    result: dict = {"ok": False}
    try:
        import torch

        from runners.inputs import make_inputs
        from runners.task import TaskSpec, read_task

        # JSON needs no yaml, which the target's Python may lack
        spec = TaskSpec.from_dict(json.loads(args.spec.read_text())) if args.spec else read_task(args.bundle)
        for path in reversed(spec.import_paths):
            sys.path.insert(0, path)
        if not spec.reference:
            raise ValueError("the task names no torch reference")
        case = _case(spec, args.case)
        device = "cpu" if args.cpu_triton else "cuda"
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: inductor emits Triton only for a GPU")
        fn = _reference(args.bundle, spec.reference)
        kwargs = make_inputs(spec.args, case, device, seed=0)
        codes, run_error = _capture(fn, kwargs, args.cpu_triton)
        if not codes:
            raise RuntimeError("torch.compile produced no generated code (a cache hit or a graph with no kernel)")
        result = {"ok": True, "case": case.id, "device": device, "torch": torch.__version__, "codes": codes}
        if run_error and not args.cpu_triton:  # on the CPU the generated code cannot run: expected
            result["run_error"] = run_error
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which carries on without it
        result = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:500]}",
                  "trace": traceback.format_exc()[-2000:]}
    args.out.write_text(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
