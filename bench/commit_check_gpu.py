"""On CUDA: the window's commitments (runners/commitments.py) give the integers the judge computes on the CPU, for every
wire dtype, odd sizes, strided outputs, through the captured plan, and with blocks hashed where their outputs lie
(runners/commit_blocks.py: the first tree launch reads the outputs through a table of addresses, no copy); prints one
line per check and the cost of a commitment, in place against the copy path (median and spread over rounds). A
standalone form of tests/test_commitments.py::test_gpu_the_device_computes_the_judges_integers for a device without
the test dependencies (that test runs ``check``): python3 bench/commit_check_gpu.py"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from runners import commitments as commit_module  # noqa: E402
from runners.commitments import CommitPlan, commitments, digest  # noqa: E402


def _sample(dtype, n, gen):
    if dtype.is_floating_point:
        return torch.randn(n, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.rand(n, generator=gen) > 0.5
    return torch.randint(-100, 100, (n,), generator=gen, dtype=dtype)


def _copied_plan(outs, capture=False) -> CommitPlan:
    """The plan of ``outs`` on the copy path (no block read where its outputs lie): what the in-place one replaced."""
    readable = commit_module.readable
    commit_module.readable = lambda *args: False
    try:
        return CommitPlan(outs, capture=capture)
    finally:
        commit_module.readable = readable


def _same_rows(a: CommitPlan, b: CommitPlan) -> bool:
    return len(a.rows) == len(b.rows) and all(x[:3] == y[:3] and x[4] == y[4] and torch.equal(x[3].cpu(), y[3].cpu())
                                              for x, y in zip(a.rows, b.rows))


def _in_place_checks(out: dict, gen) -> None:
    """Blocks hashed where their outputs lie give the CPU's integers and rows: every dtype with a length of whole
    words (rows padded past them, rows kept at levels 1 to 3 and higher), several outputs a slot, a shape per slot,
    captured (its table of addresses made once), and read again after the outputs change (a graph's replay)."""
    out["in place blocks"] = {}
    for dtype, n in ((torch.float16, 66_560), (torch.bfloat16, 4 * 1040), (torch.float32, 1 << 16),
                     (torch.int8, 9600), (torch.int32, 2080), (torch.int64, 1 << 14), (torch.float16, 4099)):
        for slots in (4, 300):  # rows kept at level 0 (the copy), 1, 3 and higher; 4099 halves: not whole words
            outs = [_sample(dtype, n, gen) for _ in range(slots)]
            plan, cpu = CommitPlan([t.cuda() for t in outs]), CommitPlan(outs)
            same = plan.hashes(7).tolist() == cpu.hashes(7).tolist() and _same_rows(plan, cpu)
            out["checks"][f"in place {dtype} {n} x{slots}"] = same
            out["in place blocks"][f"{dtype} {n} x{slots}"] = plan.in_place
    out["checks"]["in place taken"] = sum(map(bool, out["in place blocks"].values())) == 8 and not any(
        v for k, v in out["in place blocks"].items() if " 4099 " in k or " x4" in k and "bfloat16" in k)
    widths = (1024, 1040, 1024, 2048, 1040, 4096) * 8
    slots = [(torch.randn(4, w, generator=gen).half(), 7, torch.randint(-9, 9, (3, 1024), generator=gen,
                                                                        dtype=torch.int32)) for w in widths]
    cuda = [(a.cuda(), n, b.cuda()) for a, n, b in slots]
    plan = CommitPlan(cuda, capture=True)
    for key in (3, 4, 3):
        cpu = CommitPlan(slots)
        out["checks"][f"in place captured, shapes per slot, key {key}"] = \
            plan.hashes(key).tolist() == cpu.hashes(key).tolist() and _same_rows(plan, cpu)
    cuda[5][0][1, 7] += 1  # a graph's replay rewrites its outputs where they lie: read again, not a stale copy
    slots[5][0][1, 7] += 1
    out["checks"]["in place captured, outputs changed"] = plan.hashes(5).tolist() == commitments(slots, 5)
    out["in place captured"] = plan.graph is not None and bool(plan.in_place)


def _race(what: str, outs: list, rounds: int = 20) -> dict:
    """A commitment's cost (``hashes`` and the digest, per round) in place and on the copy path, rounds alternated:
    median and spread (max - min) in us; and whether both give the same integers and rows."""
    plans = {"in place": CommitPlan(outs, capture=True), "copy": _copied_plan(outs, capture=True)}
    for plan in plans.values():
        plan.hashes(1)
        plan.hashes(1)
    res = {f"in place groups, {what}": len(plans["in place"].in_place),
           f"captured both, {what}": all(p.graph is not None for p in plans.values())}
    times: dict = {name: [] for name in plans}
    for key in range(rounds):
        for name, plan in plans.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            digest(plan.hashes(key), key)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1000)
    for name, ts in times.items():
        ts.sort()
        res[f"commit us, {what}, {name}"] = round(ts[len(ts) // 2], 1)
        res[f"commit spread us, {what}, {name}"] = round(ts[-1] - ts[0], 1)
    a, b = plans["in place"], plans["copy"]
    res["same"] = a.hashes(99).tolist() == b.hashes(99).tolist() and _same_rows(a, b)
    return res


def check() -> dict:
    """The checks (``checks``: name -> the CUDA integers are the CPU's; ``captured``: the plan went into a graph) and
    the cost of a commitment of a prefill-like and a decode-like window."""
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checks": {}}
    gen = torch.Generator().manual_seed(8)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int32, torch.int64, torch.bool):
        outs = [_sample(dtype, n, gen) for n in (0, 1, 7, 9, 65, 4097, 100_003)]
        same = commitments([t.cuda() for t in outs], 5) == commitments(outs, 5)
        out["checks"][f"direct {dtype}"] = same
    slots = [(torch.randn(64, 48, generator=gen).to(torch.float16).t(), torch.randint(0, 9, (5,), generator=gen))
             for _ in range(300)]
    plan = CommitPlan([(a.cuda(), b.cuda()) for a, b in slots], capture=True)
    for key in (3, 4, 3):
        same = plan.hashes(key).tolist() == commitments(slots, key)
        out["checks"][f"captured plan key {key}"] = same
    out["captured"] = plan.graph is not None
    # an output whose shape follows a range scalar: a block of rows per shape, captured with the rest
    ranged = [(torch.randn(4, (64, 512, 200, 333)[k % 4], generator=gen).half(),) for k in range(48)]
    plan = CommitPlan([(a.cuda(),) for (a,) in ranged], capture=True)
    for key in (3, 4):
        want = CommitPlan(ranged)
        same = plan.hashes(key).tolist() == want.hashes(key).tolist()
        out["checks"][f"captured ranged plan key {key}"] = same and [r[3].cpu().tolist() for r in plan.rows] == \
            [r[3].tolist() for r in want.rows] and len(plan.rows) == 4
    out["captured ranged"] = plan.graph is not None
    _in_place_checks(out, gen)
    for what, make in (("47 slots of 64 MB", lambda: [torch.randn(32 << 20, device="cuda").half() for _ in range(47)]),
                       ("8192 slots of 8 KB", lambda: [torch.randn(4096, device="cuda").half() for _ in range(8192)])):
        res = _race(what, make())
        out["checks"][f"in place = copy, {what}"] = res.pop("same") and res[f"in place groups, {what}"] > 0
        out.update(res)
        torch.cuda.empty_cache()
    for what, outs in (("64 MB, 1 slot", [torch.randn(32 << 20, device="cuda").half()]),
                       ("48 slots of 64 MB", [torch.randn(32 << 20, device="cuda").half() for _ in range(48)]),
                       ("8192 slots of 8 KB", [torch.randn(4096, device="cuda").half() for _ in range(8192)])):
        plan = CommitPlan(outs, capture=True)
        plan.hashes(1)
        plan.hashes(1)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for key in range(10):
            digest(plan.hashes(key), key)
        end.record()
        end.synchronize()
        out[f"commit us, {what}"] = round(start.elapsed_time(end) * 100, 1)
    return out


def main() -> int:
    out = check()
    print(json.dumps(out, indent=1))
    return 0 if all(out["checks"].values()) and out["captured"] and out["in place captured"] else 1


if __name__ == "__main__":
    sys.exit(main())
