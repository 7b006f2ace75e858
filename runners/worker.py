"""A worker process: ``python -m runners.worker``. It loads ONE kernel module, the baseline (the oracle
worker) or one candidate (a candidate worker), and serves the judge's requests on a private pipe.

It never decides anything. It runs the entry on inputs the judge sent, hands back what it returned as raw
bytes (runners/wire.py), and reports device times that the judge treats as claims to be corroborated. The
candidate's worker is untrusted: everything it says is either checked by the judge or only used to refuse.

Requests (JSON, one at a time): load, warm, call, prepare_timing, sample, refill, window, reveal, host_overhead,
profile, bandwidth, probe, release, exit.
"""
from __future__ import annotations

import faulthandler
import gc
import importlib
import importlib.util
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import torch
import triton

from . import interpreter_shims, launches, preload, warm
from .compare import flatten
from .inputs import SlotBank, config_scalar
from .openings import open_slots
from .task import ArgSpec, Case
from .checkpoints import Checkpoints
from .commitments import commitments
from .timing import SlotTimer, copy_bandwidth_gbs, device_kernels, host_overhead_us
from .wire import Channel, decode_value, encode_value, read_tensor

MAX_SPIN_S = 0.05  # the longest a worker polls for a request it was told comes next (``spin_next``)


def aliased_outputs(out, kwargs: dict) -> list[bool]:
    """For each output tensor (flattened, in order): does it share memory with an input (an input handed back,
    or written in place and returned)? Only the oracle's answer is used (bytes moved, runners/protocol.py)."""
    storages = {v.untyped_storage().data_ptr() for v in kwargs.values() if isinstance(v, torch.Tensor)}
    return [t.untyped_storage().data_ptr() in storages for t in flatten(out) if isinstance(t, torch.Tensor)]


def short_traceback(exc: BaseException, limit: int = 14) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return "\n".join(text.strip().splitlines()[-limit:])


def is_compile_error(exc: BaseException) -> bool:
    # Triton raises CompilationError on a GPU; the interpreter wraps the same mistakes in InterpreterError.
    return any("Compil" in cls.__name__ or cls.__name__ == "InterpreterError" for cls in type(exc).__mro__)


def _compiled_at_first_call(fn):
    """``torch.compile(fn)``, made at the first call, when torch.compile compiles anyway: calling ``torch.compile``
    imports dynamo at once, about 3 s of every oracle's start (2.9 s of 3.4 on 2 cores), and a search that times no
    reference, or an evaluation that fails before timing, never needs it."""
    made = []

    def reference(*args, **kwargs):
        if not made:
            made.append(torch.compile(fn, dynamic=False))
        return made[0](*args, **kwargs)
    return reference


class Server:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.device = "cpu"
        self.fn = None
        self.reference = None
        self.module = None
        self.package = ""
        self.exchange: Path | None = None  # judge's folder for inputs (read-only for us)
        self.outbox: Path | None = None  # our folder for outputs
        self.timers: dict[str, SlotTimer] = {}  # "sample", "window" (and "-ref" for the torch reference)

    # ---- requests -------------------------------------------------------------------------------------
    def load(self, req: dict) -> dict:
        self.device = req["device"]
        self.exchange, self.outbox = Path(req["exchange"]), Path(req["outbox"])
        workdir = Path(req["workdir"])
        for path in reversed(req.get("import_paths") or []):
            sys.path.insert(0, path)
        sys.path.insert(0, str(workdir))
        name = req["module_name"]
        self.package = name.split(".")[0]
        if self.device == "cuda":
            torch.cuda.init()
        if req.get("interpret"):  # a stand-in driver and list grids: what the CPU interpreter lacks (nothing on a GPU)
            interpreter_shims.install()
        launches.install()
        if not req.get("interpret"):
            warm.install()
        try:
            self.module = importlib.import_module(name)
            self.fn = getattr(self.module, req["entry"])
        except Exception as exc:  # noqa: BLE001 - the module may fail in any way at import
            return {"ok": False, "stage": "compile", "error": f"{type(exc).__name__}: {exc}",
                    "traceback": short_traceback(exc)}
        if req.get("interpret"):
            launches.pin_first_config(self.module)
        info = {"ok": True, "autotuned": {k: launches.config_names(t) for k, t in launches.autotuners(self.module).items()}}
        if req.get("pin"):  # the oracle: the picks an earlier oracle of the bundle drew (runners/autotune_pins.py)
            info["pinned"] = launches.pin(self.module, req["pin"])
        if req.get("reference"):
            info["reference"] = self._load_reference(Path(req["reference_root"]), req["reference"],
                                                     req.get("compile", False))
        return info

    def _load_reference(self, root: Path, ref: str, compile_it: bool) -> dict:
        file, func = ref.split(":")
        try:
            path = root / file
            spec = importlib.util.spec_from_file_location("ks_reference", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            fn = getattr(mod, func)
            self.reference = _compiled_at_first_call(fn) if compile_it else fn
            return {"ok": True}
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def _inputs(self, metas: dict) -> dict:
        kwargs = {}
        for name, meta in metas.items():
            if isinstance(meta, dict) and meta.get("kind") == "tensor":
                # the judge's buffer as it made it: the view's strides and offset, and the storage's every byte
                kwargs[name] = read_tensor(meta, self.exchange, 1 << 40, self.device, storage=True)
            else:
                kwargs[name] = config_scalar(decode_value(meta, self.exchange, 0))
        return kwargs

    def _poison(self, nbytes: int) -> None:
        """NaN bytes where the caching allocator will hand out the next blocks: unwritten outputs show."""
        if self.device == "cuda":
            torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(0xFF)

    def call(self, req: dict) -> dict:
        fn = self.reference if req.get("reference") else self.fn
        t0 = time.perf_counter()  # where a call's time goes in this process (``spent``: said, never judged)
        kwargs = self._inputs(req["inputs"])
        before = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        t_in = time.perf_counter()
        if req.get("pin") and self.module is not None:
            pinned = launches.pin(self.module, req["pin"])
        else:
            pinned = {}
        self._poison(int(req.get("poison_bytes", 0)))
        try:
            recorder = launches.Recorder()
            with recorder as launched:
                out = fn(**kwargs)
                if self.device == "cuda":
                    torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a kernel may raise anything
            return {"ok": False, "stage": "compile" if is_compile_error(exc) else "correctness",
                    "error": f"raised {type(exc).__name__}: {exc}", "traceback": short_traceback(exc)}
        t1 = time.perf_counter()
        tag = req["tag"]
        written = {n: encode_value(self.outbox, f"{tag}-w-{n}", kwargs[n]) for n in req.get("written", [])
                   if isinstance(kwargs.get(n), torch.Tensor)}
        modified = [n for n, t in before.items() if n not in req.get("written", []) and not torch.equal(t, kwargs[n])]
        encoded = encode_value(self.outbox, f"{tag}-out", out)
        t2 = time.perf_counter()
        reply = {"ok": True, "out": encoded, "written": written,
                 "out_sum": commitments([out])[0], "input_sums": {k: commitments([v])[0] for k, v in before.items()},
                 "modified": modified, "launched": sorted({f"{m}:{k}" for m, k in launched}), "pinned": pinned,
                 "aliased": aliased_outputs(out, kwargs)}
        reply["tuners"] = len(recorder.tuned)  # launches through an autotuner: the judge pairs no trial of those
        reply["spent"] = {"inputs": t_in - t0, "call": t1 - t_in, "outputs": t2 - t1, "sums": time.perf_counter() - t2}
        if self.module is not None:
            reply["autotune"] = launches.autotune_state(self.module)
        return reply

    def warm(self, req: dict) -> dict:
        """The candidate's kernels compiled at every case's shapes before its turn (runners/warm.py); on the
        interpreter (and the tests' timed CPU stand-in) there is nothing to compile."""
        if self.fn is None or self.device != "cuda":
            return {"ok": True, "calls": 0, "skipped": "nothing to compile off the GPU"}
        args = [ArgSpec(**a) for a in req["args"]]
        return warm.warm(self.fn, args, [Case(**c) for c in req["cases"]], self.device)

    def _bank(self, req: dict) -> SlotBank:
        args = [ArgSpec(**a) for a in req["args"]]
        case = Case(**req["case"])
        bank = SlotBank(args, case, self.device, int(req["count"]), per_slot_scales=req.get("which") != "window")
        bank.fill(int(req["seed"]))
        return bank

    def prepare_timing(self, req: dict) -> dict:
        """Graphs over ``count`` rotating slots for the samples (``window``: over the judge's window slots)."""
        key = req.get("which", "sample") + ("-ref" if req.get("reference") else "")
        if self.timers.pop(key, None) is not None and self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        fn = self.reference if req.get("reference") else self.fn
        bank = self._bank(req)
        written = [str(n) for n in req.get("written") or []]
        if written and req.get("which") == "window":
            fn = _with_written(fn, written)
        checks = None
        if req.get("which") == "window" and req.get("checkpoints"):  # the judge's, between the calls of its pass
            c = req["checkpoints"]
            checks = Checkpoints(bank.slots, [int(k) for k in c.get("at", [])], int(c.get("elements", 8)),
                                 c.get("link"))
        timer = SlotTimer(fn, bank.slots, checks)
        timer.bank = bank
        method = timer.prepare()
        self.timers[key] = timer
        return {"ok": True, "method": method, "per_call_us": timer.sample_us(1)}

    def _timer(self, req: dict) -> SlotTimer:
        key = req.get("which", "sample") + ("-ref" if req.get("reference") else "")
        if key not in self.timers:
            raise RuntimeError("prepare_timing first")
        return self.timers[key]

    def sample(self, req: dict) -> dict:
        return {"ok": True, "us": self._timer(req).sample_us(int(req["replays"]), int(req.get("lead_cycles", 0)))}

    @staticmethod
    def _fill(timer: SlotTimer, seed: int) -> None:
        timer.bank.fill(seed)
        if timer.checks is not None:  # the checkpoints' positions, from the same seed
            timer.checks.fill(seed, timer.bank.blocks, timer.bank.numels)

    def refill(self, req: dict) -> dict:
        timer = self._timer(req)
        self._fill(timer, int(req["seed"]))
        if self.device == "cuda":
            torch.cuda.synchronize()
        return {"ok": True}

    def window(self, req: dict) -> dict:
        timer = self._timer({"which": "window"})
        seed = int(req["seed"])  # the values are only known now, inside the judge's clock
        # one digest of every slot's outputs, keyed by the request: the per-slot hashes stay on the device until
        # `reveal` (no host work per slot inside the judge's clock)
        quiet = bool(req.get("quiet")) and gc.isenabled()  # no collection inside the judge's clock
        if quiet:
            gc.disable()
        try:
            pass_us, root, parts = timer.window(int(req.get("lead_cycles", 0)), fill=lambda: self._fill(timer, seed),
                                                key=int(req.get("key", 0)))
        finally:
            if quiet:
                gc.enable()
        return {"ok": True, "pass_us": pass_us, "commitment": root, **parts}

    def reveal(self, req: dict) -> dict:
        timer = self._timer({"which": "window"})
        reply = {"ok": True, "outs": {str(k): encode_value(self.outbox, f"{req['tag']}-slot{k}", timer.outputs[k])
                                      for k in req["slots"]},
                 "sums": {str(k): commitments([timer.outputs[k]])[0] for k in req["slots"]}}
        if timer.committed is not None:  # the window's per-slot commitments, one binary file, after the clock
            reply["commitments"] = encode_value(self.outbox, f"{req['tag']}-commitments", timer.committed)
            plan = timer.commit_plan  # and the chunk-level nodes the digest covers (runners/openings.py)
            reply["rows"] = [{"position": p, "level": j, "nbytes": n, "slots": list(members) if members else None,
                              "nodes": encode_value(self.outbox, f"{req['tag']}-rows{p}-{i}", nodes)}
                             for i, (p, j, n, nodes, members) in enumerate(plan.rows)]
            if req.get("open"):  # chunks of many more slots, each under a node of those rows
                o = req["open"]
                opened = open_slots(timer.outputs, plan, [int(k) for k in o["slots"]], int(o["seed"]), int(o["per"]))
                for i, g in enumerate(opened["groups"]):
                    g["words"] = encode_value(self.outbox, f"{req['tag']}-open{i}", g["words"])
                reply["open"] = opened
        if timer.checks is not None:  # the checkpoints' traces (bound by the digest), and (the oracle's) their time
            reply["checkpoints"] = encode_value(self.outbox, f"{req['tag']}-checkpoints", timer.checks.traces())
            reply["checkpoint_layout"] = timer.checks.layout()
            if req.get("time_checks"):
                reply["checks_us"] = timer.checks.time_alone(timer.outputs)
        return reply

    def host_overhead(self, req: dict) -> dict:
        timer = self._timer(req)
        return {"ok": True, "us": host_overhead_us(lambda: timer.fn(**timer.slots[0]))}

    def profile(self, req: dict) -> dict:
        """The kernels one call runs, on a slot of its own (no timing state needed)."""
        slot = self._bank({**req, "count": 1}).slots[0]
        recorder = launches.Recorder()
        kernels, sequence = device_kernels(lambda: self.fn(**slot), around=recorder)
        if len(recorder.threads) > 1:  # launch order is return order in one thread only: the events stay unmatched
            sequence = None
        return {"ok": True, "kernels": kernels, "sequence": sequence,
                "launches": [f"{m}:{k}" for m, k in recorder.launched]}

    def probe(self, req: dict) -> dict:
        """Before any candidate code: can this worker use the device and write its outbox?"""
        if req["device"] == "cuda":
            torch.cuda.init()
            torch.zeros(1, device="cuda").add_(1)
            torch.cuda.synchronize()
        (Path(req["outbox"]) / "probe").write_text("ok")
        return {"ok": True}

    def bandwidth(self, req: dict) -> dict:
        return {"ok": True, "gbs": copy_bandwidth_gbs(),
                "l2_bytes": torch.cuda.get_device_properties(0).L2_cache_size,
                "device": torch.cuda.get_device_name(), "cuda": torch.version.cuda or torch.version.hip}

    def release(self, req: dict) -> dict:
        if req.get("reference"):
            self.timers = {k: v for k, v in self.timers.items() if not k.endswith("-ref")}
        else:
            self.timers = {}
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return {"ok": True}

    def serve(self) -> None:
        handlers = {"load": self.load, "call": self.call, "prepare_timing": self.prepare_timing,
                    "sample": self.sample, "refill": self.refill, "window": self.window, "reveal": self.reveal,
                    "host_overhead": self.host_overhead, "profile": self.profile, "bandwidth": self.bandwidth,
                    "probe": self.probe, "warm": self.warm,
                    "release": self.release}
        self.channel.send({"ok": True, "ready": True, "torch": torch.__version__, "triton": triton.__version__})
        spin = 0.0  # a request may ask that the next one be polled for (the judge's window follows its warm-up)
        while True:
            try:
                req = self.channel.recv(spin_s=spin)
            except Exception:  # noqa: BLE001 - the judge went away
                return
            op = req.get("op")
            spin = min(max(float(req.get("spin_next") or 0.0), 0.0), MAX_SPIN_S)
            if op == "exit":
                return
            try:
                reply = handlers[op](req)
            except Exception as exc:  # noqa: BLE001 - reported to the judge, which decides
                reply = {"ok": False, "stage": "compile" if is_compile_error(exc) else "harness",
                         "error": f"{type(exc).__name__}: {exc}", "traceback": short_traceback(exc)}
            reply["seq"] = req.get("seq")
            self.channel.send(reply)


def _with_written(fn, written: list[str]):
    """A slot's result in the judge's window: what the entry returns and the inputs it writes in place (the same
    tensors on every graph replay), committed to and shown together."""
    def call(**slot):
        return (fn(**slot), *[slot[name] for name in written if name in slot])
    return call


def main() -> None:
    # Not dumpable (reset by execve, so set here): no other process of this user reads or writes this one's
    # memory through /proc. For the oracle this keeps the reference outputs out of a candidate's reach.
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE
    if hasattr(signal, "SIGUSR1"):  # `kill -USR1` prints where a stuck worker is, into its log
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    read_fd, write_fd = int(os.environ.pop("KS_REQ_FD")), int(os.environ.pop("KS_REP_FD"))
    warmed = preload.run_from_env()
    if warmed:
        print(f"preload: {json.dumps(warmed)}", file=sys.stderr, flush=True)
    Server(Channel(read_fd, write_fd)).serve()


if __name__ == "__main__":
    main()
