"""Whose kernels did the work: the candidate's own Triton kernels' share of its device time, from the profile of one
call on each side, and the kernel names that may count as the candidate's (a bare library prefix, a name another
package's kernel also bears, or one of the names torch.compile and the vendor libraries give their kernels never
do). ``KernelShare`` is the part of ``runners.judge.Judge`` that asks for the profiles and refuses."""
from __future__ import annotations

import re

from .protocol import Refusal, trial_seed
from .results import CaseResult
from .task import Case


class KernelShare:
    """The judge's own-kernel check; uses its protocol ``p``, its two workers and ``_bank_request``."""

    def own_kernel_share(self, case: Case, index: int, secret: int, result: CaseResult) -> None:
        """Device time in the candidate's own Triton kernels, against the baseline's share (GPU only)."""
        own = own_names(result.launched, self._own(result.launched))
        bank = self._bank_request(case, 1, trial_seed(secret, 70_000, index))
        key = ("profile", case.id)  # the baseline's kernels per case do not change: profiled once per oracle
        reply_b = self.oracle.cache.get(key) or self.oracle.request("profile", **bank)
        if reply_b.get("ok"):
            self.oracle.cache[key] = reply_b
        reply_c = self.candidate.request("profile", **bank)
        if not reply_b.get("ok"):
            return  # no profiler on this machine: the launch record stands alone
        if not reply_c.get("ok"):
            raise Refusal("kernel", f"{result.case}: the candidate's kernels could not be profiled: {reply_c.get('error')}")
        # a name the candidate's kernel shares with another package's: its events in the profiled call, matched to
        # that call's launches one by one
        matched = attributed_us(reply_c.get("sequence"), reply_c.get("launches"), self._own(reply_c.get("launches") or []))
        share_c = _share(reply_c["kernels"], own, matched)
        share_b = _share(reply_b["kernels"], None)
        result.own_kernel_share = share_c
        if share_c is not None and share_b is not None and share_c < self.p.min_own_share * share_b:
            clash = collisions(result.launched, self._own(result.launched))
            named = "; ".join(f"its kernel `{n}` shares its name with {', '.join(f'`{k}`' for k in ks)}"
                              for n, ks in sorted(clash.items()))
            raise Refusal("kernel", f"{result.case}: only {share_c:.0%} of the candidate's device time is in its own "
                                    f"Triton kernels (the baseline: {share_b:.0%}); the work is done elsewhere" +
                                    (f" ({named}, which the profile cannot tell apart: the name is not counted as "
                                     f"its own; rename the kernel)" if clash else ""))


def _share(kernels: list, names: set | None, matched_us: float = 0.0) -> float | None:
    """The share of the profiled device time in kernels named ``names`` (the baseline's: all but the library's), plus
    ``matched_us`` (``attributed_us``: the candidate's kernels whose name another package's kernel bears too)."""
    total = sum(us for _, us in kernels)
    if total <= 0:
        return None
    if names is None:  # the baseline: all of its kernels that are Triton's (not aten/memcpy/memset)
        picked = sum(us for name, us in kernels if not _library_kernel(name))
    else:
        picked = sum(us for name, us in kernels if any(_same_kernel(name, n) for n in names))
    return min(picked + matched_us, total) / total


def attributed_us(sequence: list | None, launches: list[str] | None, own: list[str]) -> float:
    """Device time of the candidate's own kernels whose name a kernel of another package also bears, which the
    profile's sums by name cannot tell apart (``collisions``; a generic ``_fwd_kernel`` is common in serving engines).
    The profiled call's device events (``sequence``: name, microseconds, the link to the launch call that made it)
    that bear one of a collision's names are put in launch order by their links and matched one by one to the same
    call's launches of those names (``launches``, in order), and the events matched to the candidate's own launches
    count as its own. Where the counts differ (a launch that ran no kernel, a profile without events), or an event
    has no link or shares one (kernels of one CUDA graph's replay), nothing is matched: start order is not launch order
    on two streams (round 24), so the name stays uncounted, as before. Both lists are the candidate's worker's report,
    as the profile's sums are (the own-kernel share is evidence against a torch-only candidate, not a wall:
    docs/evaluation.md)."""
    if not sequence or not launches:
        return 0.0
    own_set = set(own)
    taken: set[int] = set()
    total = 0.0
    for name, hits in collisions(launches, own).items():
        group = {name} | {f.split(":")[-1] for f in hits}
        ours = [k in own_set for k in launches if k.split(":")[-1] in group]
        events = [i for i, ev in enumerate(sequence)
                  if i not in taken and any(_same_kernel(str(ev[0]), g) for g in group)]
        links = [int(sequence[i][2]) if len(sequence[i]) > 2 else 0 for i in events]
        if len(events) != len(ours) or min(links, default=0) <= 0 or len(set(links)) != len(links):
            continue  # matched only by each event's own link to its launch call, never by start order
        events = [i for _, i in sorted(zip(links, events))]
        taken.update(events)
        total += sum(float(sequence[i][1]) for i, mine in zip(events, ours) if mine)
    return total


def own_names(launched: list[str], own: list[str]) -> set[str]:
    """The names the profile may count as the candidate's: its own kernels' (``module:name``), less any name that a
    kernel from outside its package also bears (the profile tells kernels apart by name only, so a token kernel of
    its own named like another package's kernel doing the work would claim that work: round 8's review)."""
    # a name the profile would match to a foreign one either way (`norm` would claim `norm_2d`): not the candidate's
    return {k.split(":")[-1] for k in own} - set(collisions(launched, own))


def collisions(launched: list[str], own: list[str]) -> dict[str, list[str]]:
    """The candidate's kernel names that ``own_names`` leaves out, each with the foreign kernels (``module:name``)
    that it would be confused with: what a refusal names, so that the search can rename them."""
    foreign = [k for k in launched if k not in own]
    out: dict[str, list[str]] = {}
    for n in sorted({k.split(":")[-1] for k in own}):
        hits = [f for f in foreign if _same_kernel(f.split(":")[-1], n) or _same_kernel(n, f.split(":")[-1])]
        if hits:
            out[n] = hits
    return out


def _same_kernel(profiled: str, launched: str) -> bool:
    """The profiler's name of a launched Triton kernel: its own name, or that name with a specialisation suffix
    (older Triton: ``_0d1d2de``: a digit first, no underscore). Never a bare prefix: a kernel named ``void`` would
    claim 'void at::...', and one named ``triton`` every kernel torch.compile generates, ``triton_poi_fused_..._0``
    (tests/test_judge_attacks_round8.py)."""
    return profiled == launched or (profiled.startswith(launched + "_")
                                    and re.fullmatch(r"\d[0-9a-z]*", profiled[len(launched) + 1:]) is not None)


# Kernel names torch.compile (inductor) and the vendor libraries give their kernels: plain identifiers that a
# candidate's own @triton.jit kernel could take, so that the profile's kernels of a torch-only computation count as
# its own (tests/test_judge_attacks_round7.py, kernels named after inductor's). Refused where the baseline has none.
# Names of torch.compile's (inductor's) and the libraries' kernels begin with one of these and an underscore
_LIBRARY_PREFIXES = r"triton_(poi|per|red|tem|for|unk)|cpp_fused|nvjet|cutlass|sm\d+_xmma|ampere|volta|turing"
_BORROWED = re.compile(rf"^({_LIBRARY_PREFIXES})_")
# ... and a kernel named one of those, or their first word (``triton``, ``sm90``), is a prefix of theirs
_BORROWED_STEMS = re.compile(rf"^(triton|cpp|sm\d+|{_LIBRARY_PREFIXES})$")


def borrowed_name(name: str) -> bool:
    return _BORROWED.match(name) is not None or _BORROWED_STEMS.match(name) is not None


def _library_kernel(name: str) -> bool:
    return any(s in name for s in ("at::", "aten::", "Memcpy", "Memset", "elementwise", "reduce_kernel", "cub::"))
