"""Cheat: reach `os` through torch, write a made-up "done, ok, fast" reply to every pipe the worker holds and
exit without computing anything. Caught by the static policy (`from torch import os`) and, past it, by the
protocol: the judge reads no verdict from a worker, and a malformed reply ends the evaluation as crashed."""
import torch
from torch import os


def _forge():
    case = {"case": "T=3,H=256/float16", "correct": True, "trials": 3, "baseline_us": 100.0, "candidate_us": 40.0}
    verdict = ('{"stage": "done", "ok": true, "timed": true, "error": "", "duration_s": 1.0, "env": null, '
               '"notes": [], "cases": [%s]}' % str(case).replace("'", '"').replace("True", "true")).encode()
    for fd in range(3, 64):
        try:
            if os.readlink("/proc/self/fd/%d" % fd).startswith("pipe:"):
                os.write(fd, verdict)
        except OSError:
            continue
    os._exit(0)


if __name__.startswith("ks_candidate"):  # only inside the evaluator: the repository's test sees a real kernel
    _forge()


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    return torch.ones_like(hidden_states)
