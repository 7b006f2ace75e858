"""On CUDA: the window's commitments (runners/commitments.py) give the integers the judge computes on the CPU, for every
wire dtype, odd sizes, strided outputs, and through the captured plan; prints one line per check and the cost of a
commitment. A standalone form of tests/test_commitments.py::test_gpu_the_device_computes_the_judges_integers for a
device without the test dependencies (that test runs ``check``): python3 bench/commit_check_gpu.py"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from runners.commitments import CommitPlan, commitments, digest  # noqa: E402


def _sample(dtype, n, gen):
    if dtype.is_floating_point:
        return torch.randn(n, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.rand(n, generator=gen) > 0.5
    return torch.randint(-100, 100, (n,), generator=gen, dtype=dtype)


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
    return 0 if all(out["checks"].values()) and out["captured"] else 1


if __name__ == "__main__":
    sys.exit(main())
