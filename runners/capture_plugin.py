"""A pytest plugin that records every call of one entry function while the repository's own tests run.

It runs inside the target's Python, so it uses only the standard library and torch. kernelsmith copies this
file beside the test run as ``ks_capture_plugin.py`` and loads it with ``-p ks_capture_plugin``; the
environment says what to record:

    KS_CAPTURE_MODULE   dotted name of the kernel module (``sglang.srt.layers.norm``)
    KS_CAPTURE_ENTRY    the entry function's name in it
    KS_CAPTURE_OUT      a JSON-lines file; one line per recorded call
    KS_CAPTURE_LIMIT    at most this many calls are recorded (default 2000)
    KS_CAPTURE_WRITES   for at most this many distinct signatures, inputs are cloned before the call and
                        compared after it, to see which arguments the entry writes (default 32)
    KS_CAPTURE_STOP     when set above 0, the test session stops after this many recorded calls (for
                        `kernelsmith init`, which needs calls, not a pass)
    KS_CAPTURE_VALUES   a folder: the values of integer and bool tensor arguments are written there, one file of
                        raw bytes per distinct tensor (named by its sha256), and the call's line names the file;
                        unset: values are not recorded
    KS_CAPTURE_VALUE_ELEMENTS  a tensor over this many elements is not recorded (default 1 Mi)
    KS_CAPTURE_VALUE_BYTES     nor once the files of the run hold this many bytes (default 64 MiB)
    KS_CAPTURE_CPU      "1" on the CPU interpreter: tensors the tests place on ``cuda`` (``device="cuda"``,
                        ``.cuda()``, ``.to("cuda")``) are made on the CPU instead; ``torch.cuda.synchronize``,
                        ``set_device`` and ``empty_cache`` do nothing, ``current_device()`` is 0, ``is_available()``
                        is true with one device, ``set_default_device("cuda")`` sets the CPU, and the compute
                        capability is (0, 0); Triton's
                        interpreter gets a stand-in driver and list grids (``runners/interpreter_shims.py``,
                        copied beside this file as ``ks_interpreter_shims.py``). Tests written for a GPU run as
                        a dry run; the summary counts the moved tensors. Without KS_CAPTURE_MODULE the plugin
                        records nothing: every test run on the interpreter loads it for the dry run alone

Each line holds, per argument, a tensor's shape, dtype, strides, contiguity, storage offset and device, or a
scalar's value, and which tensors the call wrote; and the test that made the call. An integer or bool tensor
also gets ``values``: ``{"file", "sha256", "nbytes"}`` of its elements as the call received them (before the
call ran; row-major, little-endian, nothing pickled), or ``{"skipped": why}`` when it was over a bound. The
entry is replaced in its module and in every module that had already bound it by name, so calls through any
import are seen.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import sys

_STATE: dict = {"original": None, "wrapper": None, "calls": 0, "signatures": set(), "error": None,
                "cuda_moved": None, "session": None, "value_files": {}, "value_bytes": 0, "values_skipped": 0}


def _on_cpu(device):
    """``device`` with CUDA replaced by the CPU (a string, a torch.device or a bare GPU index)."""
    import torch

    if isinstance(device, str) and device.split(":")[0] == "cuda":
        return "cpu"
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    if isinstance(device, int) and not isinstance(device, bool):
        return "cpu"
    return device


class _NoDevice:
    """``torch.cpu.device(index)`` for the dry run: a device context that selects nothing (there is one CPU)."""

    def __init__(self, device=None):
        self.device = device

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


def _map_cuda_to_cpu() -> None:
    """Tests that hard-code ``device="cuda"`` run on the CPU interpreter: every torch call that places a tensor
    on CUDA places it on the CPU (a TorchFunctionMode kept for the whole run)."""
    import torch
    from torch.overrides import TorchFunctionMode

    moved = _STATE["cuda_moved"] = {"count": 0}

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if "device" in kwargs and _on_cpu(kwargs["device"]) is not kwargs["device"]:
                kwargs["device"] = _on_cpu(kwargs["device"])
                moved["count"] += 1
            if name == "cuda" and args and isinstance(args[0], torch.Tensor):
                moved["count"] += 1
                return args[0]
            if name == "to" and len(args) > 1 and _on_cpu(args[1]) is not args[1]:
                args = (args[0], _on_cpu(args[1]), *args[2:])
                moved["count"] += 1
            return func(*args, **kwargs)

    torch.cuda.synchronize = lambda *a, **k: None
    # tests that skip without a GPU (`if not torch.cuda.is_available(): raise SkipTest`, SGLang's setUpClass)
    # and then `torch.set_default_device("cuda")`: the dry run is their GPU, and its default device the CPU
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    if not hasattr(torch.cpu, "device"):
        # engines that take the device module from Triton's driver (flash-linear-attention's fla/utils.py, vendored
        # by SGLang: `getattr(torch, triton.runtime.driver.active.get_current_target().backend).device(i)`) get
        # `torch.cpu` from the interpreter's stand-in driver, which has no device context: one that does nothing
        torch.cpu.device = _NoDevice
    # entries that check their inputs (`assert x.is_cuda`, SGLang's diffusion kernels; `if not raw.is_cuda:` a torch
    # fallback that skips the kernel): a tensor the dry run made on the CPU for `cuda` is the GPU's
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", "cpu"))
    set_default_device = torch.set_default_device
    torch.set_default_device = lambda device: set_default_device(_on_cpu(device))
    # the device-index bookkeeping tests do before they place tensors (``torch.cuda.current_device()`` to
    # build a device, ``set_device(0)``, ``empty_cache()``): the one "GPU" is the CPU. Queries of the device
    # itself (its properties) still raise: there is no GPU to describe
    torch.cuda.current_device = lambda: 0
    # a test that skips below a compute capability (`skipif(get_device_capability()[0] < 9)`) skips: the CPU
    # interpreter is no GPU of any capability
    torch.cuda.get_device_capability = lambda *a, **k: (0, 0)
    torch.cuda.set_device = lambda *a, **k: None
    torch.cuda.empty_cache = lambda: None
    CudaOnCpu().__enter__()  # never left: the mode lasts as long as the test run


def _describe(value) -> dict:
    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
                "stride": list(value.stride()), "contiguous": value.is_contiguous(),
                "offset": value.storage_offset(), "device": value.device.type}
    if value is None:
        return {"kind": "none"}
    if isinstance(value, (bool, int, float, str)):
        return {"kind": "scalar", "value": value}
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value).replace("torch.", "")}
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float)) for v in value):
        return {"kind": "scalar", "value": list(value)}
    if isinstance(value, (list, tuple)):
        return {"kind": "sequence", "items": [_describe(v) for v in value][:16]}
    return {"kind": "other", "type": type(value).__name__}


def _raw_bytes(t) -> bytes:
    import torch

    flat = t.detach().reshape(-1).contiguous().cpu().view(torch.uint8)
    try:
        return flat.numpy().tobytes()
    except (RuntimeError, TypeError):  # a torch built without numpy
        return bytes(flat.tolist())


def _snapshot(arguments: dict) -> dict:
    """Before the call: the raw bytes of each integer or bool tensor argument (or why it is not recorded)."""
    import torch

    if not os.environ.get("KS_CAPTURE_VALUES"):
        return {}
    limit = int(os.environ.get("KS_CAPTURE_VALUE_ELEMENTS", str(1 << 20)))
    out = {}
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex()):
            if value.numel() > limit:
                out[name] = f"{value.numel()} elements, over the {limit} recorded per tensor"
                continue
            try:
                out[name] = _raw_bytes(value)
            except Exception as exc:  # noqa: BLE001 - the test run goes on; the case draws this tensor
                out[name] = f"not recorded: {type(exc).__name__}: {exc}"
    return out


def _store(raw: bytes | str) -> dict:
    """After a call that returned: one file per distinct content under KS_CAPTURE_VALUES, within the budget."""
    import hashlib

    if isinstance(raw, str):
        _STATE["values_skipped"] += 1
        return {"skipped": raw}
    budget = int(os.environ.get("KS_CAPTURE_VALUE_BYTES", str(64 << 20)))
    digest = hashlib.sha256(raw).hexdigest()
    files = _STATE["value_files"]
    if digest not in files:
        if _STATE["value_bytes"] + len(raw) > budget:
            _STATE["values_skipped"] += 1
            return {"skipped": f"the run's {budget} bytes of recorded values were used up"}
        name = f"{digest}.bin"
        try:
            with open(os.path.join(os.environ["KS_CAPTURE_VALUES"], name), "wb") as out:
                out.write(raw)
        except OSError as exc:
            _STATE["values_skipped"] += 1
            return {"skipped": f"not recorded: {exc}"}
        files[digest] = name
        _STATE["value_bytes"] += len(raw)
    return {"file": files[digest], "sha256": digest, "nbytes": len(raw)}


def _with_values(described: dict, snapshot: dict) -> dict:
    """``described`` plus the recorded values of its integer and bool tensors."""
    return {**described, **{name: {**described[name], "values": _store(raw)} for name, raw in snapshot.items()}}


def _changed(before, after) -> bool:
    import torch

    if before.shape != after.shape:
        return True
    if torch.equal(before, after):
        return False
    return not (before.is_floating_point() and torch.allclose(before, after, rtol=0, atol=0, equal_nan=True))


def _write(record: dict) -> None:
    with open(os.environ["KS_CAPTURE_OUT"], "a") as out:
        out.write(json.dumps(record, default=str) + "\n")


def _wrap(fn):
    import torch

    signature = inspect.signature(fn)
    limit = int(os.environ.get("KS_CAPTURE_LIMIT", "2000"))
    write_checks = int(os.environ.get("KS_CAPTURE_WRITES", "32"))

    @functools.wraps(fn)
    def recorder(*args, **kwargs):
        if _STATE["calls"] >= limit:
            return fn(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            described = {name: _describe(v) for name, v in bound.arguments.items()}
        except TypeError:
            return fn(*args, **kwargs)
        key = json.dumps(described, sort_keys=True, default=str)
        snapshot = _snapshot(bound.arguments)  # before the call: the inputs as the call got them
        before = {}
        if key not in _STATE["signatures"] and len(_STATE["signatures"]) < write_checks:
            _STATE["signatures"].add(key)
            before = {n: v.detach().clone() for n, v in bound.arguments.items() if isinstance(v, torch.Tensor)}
        result = fn(*args, **kwargs)
        _STATE["calls"] += 1
        stop = int(os.environ.get("KS_CAPTURE_STOP", "0") or 0)
        if stop and _STATE["calls"] >= stop and _STATE["session"] is not None:
            _STATE["session"].shouldstop = f"kernelsmith: {stop} calls recorded"
        written = None
        if before:
            written = sorted(n for n, b in before.items() if _changed(b, bound.arguments[n].detach()))
        _write({"args": _with_values(described, snapshot), "written": written, "result": _describe(result) if not isinstance(
            result, tuple) else {"kind": "sequence", "items": [_describe(r) for r in result]},
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]})
        return result

    recorder.__ks_capture__ = True
    return recorder


def _rebind() -> None:
    """Point every module attribute that still holds the original entry at the recorder."""
    original, wrapper = _STATE["original"], _STATE["wrapper"]
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if value is original:
                namespace[name] = wrapper


def _frames_in_checkout(exc: BaseException) -> list[dict]:
    """The traceback frames of ``exc`` that lie in the repository (the test run's folder), relative to it."""
    import traceback

    root = os.path.realpath(os.getcwd())
    out = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if not os.path.isabs(frame.filename) or not os.path.isfile(frame.filename):  # <frozen importlib...>
            continue
        path = os.path.realpath(frame.filename)
        if path.startswith(root + os.sep):
            out.append({"file": os.path.relpath(path, root), "line": frame.lineno, "function": frame.name,
                        "code": (frame.line or "").strip()})
    return out


def install() -> None:
    if _STATE["wrapper"] is not None or not os.environ.get("KS_CAPTURE_MODULE"):
        return
    try:
        module = importlib.import_module(os.environ["KS_CAPTURE_MODULE"])
        original = getattr(module, os.environ["KS_CAPTURE_ENTRY"])
    except Exception as exc:  # noqa: BLE001 - the test run goes on; kernelsmith reports the reason
        _STATE["error"] = f"{type(exc).__name__}: {exc}"
        _STATE["error_frames"] = _frames_in_checkout(exc)
        return
    _STATE["original"], _STATE["wrapper"] = original, _wrap(original)
    _STATE["error"] = None
    _rebind()


def _interpreter_shims() -> None:
    """On the CPU interpreter: a stand-in Triton driver and list grids (runners/interpreter_shims.py)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("ks_interpreter_shims.py", "interpreter_shims.py"):  # copied beside it, or runners/ itself
        path = os.path.join(here, name)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("ks_interpreter_shims", path)
            shims = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(shims)
            _STATE["shims"] = shims.install()
            return


if os.environ.get("KS_CAPTURE_CPU") == "1":
    _interpreter_shims()  # first: Triton picks its driver by asking torch.cuda.is_available(), which the dry run answers yes
    _map_cuda_to_cpu()
install()  # before conftest files and test modules bind the entry by name


def pytest_configure(config) -> None:
    install()


def pytest_sessionstart(session) -> None:
    _STATE["session"] = session


def pytest_collection_finish(session) -> None:
    install()
    if _STATE["wrapper"] is not None:
        _rebind()


_NO_GPU = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
           "no GPU: kernelsmith runs this on Triton's CPU interpreter")


def _gpu_query_at(text: str) -> str | None:
    """``file line N (`code`)``: the repository's deepest line in a failure's report (relative paths are the
    repository's; torch's own files are absolute), in pytest's long or short traceback format."""
    import re

    lines = text.splitlines()
    found = None
    for i, line in enumerate(lines):
        m = re.match(r"^([^\s/][^\s:]*\.py):(\d+):", line)
        if not m:
            continue
        if line[m.end():].startswith(" in "):  # short format: `file.py:584: in <module>`, then the code
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        else:  # long format: the code marked `>` above `file.py:6: `
            code = next((x[1:].strip() for x in reversed(lines[max(0, i - 30):i]) if x.startswith(">")), "")
        found = f"{m.group(1)} line {m.group(2)}" + (f" (`{code}`)" if code else "")
    return found


def pytest_runtest_logreport(report) -> None:
    _note_gpu_query(report)


def pytest_collectreport(report) -> None:
    _note_gpu_query(report)


def _note_gpu_query(report) -> None:
    if os.environ.get("KS_CAPTURE_CPU") != "1" or not report.failed:
        return
    text = str(report.longrepr)
    if any(w in text for w in _NO_GPU):
        at = _gpu_query_at(text)
        if at:
            _STATE.setdefault("gpu_queries", []).append(at)


def pytest_terminal_summary(terminalreporter) -> None:
    """On the CPU dry run, one line per place a failing test asked torch.cuda about the GPU (kernelsmith reads
    it from the end of the output, which pytest's long tracebacks would otherwise push out)."""
    for at in list(dict.fromkeys(_STATE.get("gpu_queries") or []))[:5]:
        terminalreporter.write_line(f"kernelsmith CPU dry run: {at} asks torch.cuda about the GPU")


def pytest_sessionfinish(session, exitstatus) -> None:
    if not os.environ.get("KS_CAPTURE_OUT"):  # loaded for the CPU dry run only (bot/capture.py cpu_dry_run)
        return
    _write({"summary": True, "calls": _STATE["calls"], "error": _STATE["error"],
            "error_frames": _STATE.get("error_frames") or [], "shims": _STATE.get("shims") or [],
            "installed": _STATE["wrapper"] is not None,
            "cuda_moved": None if _STATE["cuda_moved"] is None else _STATE["cuda_moved"]["count"],
            "value_files": len(_STATE["value_files"]), "value_bytes": _STATE["value_bytes"],
            "values_skipped": _STATE["values_skipped"]})
