"""The judge's numbers and the small pieces every step of the protocol shares (no kernel code here)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from .wire import children


@dataclass
class Protocol:
    """The judge's numbers, in one place."""

    target_spread: float = 0.01  # interquartile range / median per side
    min_rounds: int = 10
    max_rounds: int = 200
    case_time_cap_s: float = 1.5  # sampling time per case (both sides)
    # while screening: sampling also stops once the two sides' interquartile ranges are apart and their medians at
    # least this far from parity (a clear loss or win; 0: never, sample to the spread target or the cap)
    decisive_margin: float = 0.0
    # while screening (``window_every_case`` off): a case is clocked only where its claim is above this; one under it
    # is credited parity (1.0: every claim of a speedup is clocked)
    clock_above: float = 1.0
    sample_us: float = 2000.0  # device time of one sample
    # device sleep before each sample's start event (about 0.1 ms at 2 GHz), so that the host's launches are queued
    # ahead and no sample holds host time (runners/timing.py SlotTimer.sample_us)
    sample_lead_cycles: int = 200_000
    slot_us: float = 200.0  # device time of one replay of every slot (sets how many slots)
    max_slots: int = 64
    slot_bytes: int = 1 << 30  # memory for the rotating slots of one side
    window_us: float = 20000.0  # the judge's corroboration pass per side: this long, or as long as memory allows
    window_bytes: int = 6 << 30  # memory for the window's distinct slots, per side
    max_window_slots: int = 8192  # at decode sizes (~1.5 us a call) a pass of ~12 ms against ~1 ms of extra
    # alternated passes per side, fresh values each; the first is a warm-up, and the candidate's pass is the median of
    # the others' paired differences: with two counted rounds (the median is their mean) one round's 1.6 ms jump read
    # LayerNorm against itself at 1.49x on the H200; over the same session's ten-round windows the clock's log ratio
    # moved 0.06-0.56 (rms) counting two rounds, 0.05-0.29 counting four, 0.01-0.18 counting six (seventeenth session)
    window_rounds: int = 7
    # device time of passes each side runs (on other values) just before its timed window: after the judge's checks
    # of a round leave the GPU idle for a while, the window's fill and commitment ran 0.5 ms slower on the H200 and
    # moved more, and a warm-up of 20-100 ms took that back (bench/window_warmth_gpu.py, sixteenth session)
    window_warm_us: float = 30000.0
    # a claim just beyond what the clock resolves (by at most ``window_retry_band``) is measured again (fresh values,
    # the same rounds) this many times before the candidate is quarantined; the credit is held to the lowest view
    window_retries: int = 1
    window_retry_band: float = 0.05
    corroboration_tolerance: float = 0.05  # |judge's clock / claimed - 1| allowed, plus the clock's jitter
    clock_jitter_us: float = 150.0  # round trip of a request, as a share of a short pass
    reveal_slots: int = 16  # slots the judge has shown after each pass, chosen in secret
    # slots opened after each pass besides (every slot but at decode sizes, where the shown 16 a round already see a
    # skipped tenth of the calls almost surely): a few chunks each, drawn in secret, each with its hash-tree path to
    # the slot's commitment (runners/openings.py); about 0.1 s a round for both sides at 1024 (CPU)
    open_slots: int = 1024
    open_chunks: int = 2
    # device sleep queued before the fill (at most about 0.12 ms at 2 GHz; 30 cycles a slot below that), so that the
    # fill's first kernels are queued before the device starts on them; never credited to the candidate, who may skip it
    # (runners/corroboration.py corroborate)
    window_lead_cycles: int = 250_000
    # the window's requests without garbage collection on either side, their replies polled for rather than slept
    # on where the device is a GPU (the worker polls for the window request after its warm-up): the requests' host
    # time beyond their device work was 0.25-0.8 ms on the H200 without, 0.15-0.3 ms with (fifteenth session)
    window_quiet: bool = True
    # checkpoints between the calls of the window's pass (runners/checkpoints.py): after this share of the calls (at
    # least ``checkpoint_least``), drawn in secret, a trace of the call's outputs and a link into the next call's input,
    # ``checkpoint_elements`` values each: work left for a later call or done ahead of its call is wrong there (round 4)
    # (at most ``checkpoint_most``: at decode sizes' 8192 slots, a thousand checkpoints would add a few thousand small
    # kernels to a pass, whose cost is taken off by a measurement of its own, with its own error)
    checkpoint_share: float = 0.125
    checkpoint_least: int = 4
    checkpoint_most: int = 256
    checkpoint_elements: int = 8
    max_fetch_bytes: int = 256 << 20
    min_own_share: float = 0.5  # the candidate's own kernels' share of its device time, relative to the baseline's
    profile_every_case: bool = True  # the own-kernel share at every case (else only where a speedup is claimed)
    window_every_case: bool = True  # the judge's clock at every case (else only where a speedup is claimed: it
    # exists to corroborate a claim and to check the outputs of calls that claim to be faster)
    layout_trial: bool = True  # more trials per case on row-padded inputs, where the baseline takes them
    # of the three padded layouts (rows padded by one run, by spread runs, every level), how many a case tries; the
    # search tries one, drawn from the secret (the layout trials were half the correctness phase of a screening on
    # the H200, eleventh session), the verification all three
    layout_trials: int = 3
    masked_trial: bool = True  # one more trial per case on -inf-masked rows, where the baseline's answer is finite
    # the re-check after timing tries the padded layouts too (round 17: a kernel can stop honouring strides once it
    # has been timed); the search's screening leaves them to the champion's verification
    recheck_layout: bool = True
    name: str = "verify"

    @classmethod
    def search(cls) -> Protocol:
        """The screening protocol the search runs on every candidate: every check of the verification protocol
        (fresh inputs, alternated samples, the judge's clock over distinct slots with outputs checked, the
        own-kernel share, the re-check), on a smaller time budget: shorter sampling, a shorter window and fewer of
        its rounds (three counted: their median passes over one round's jump), the
        own-kernel share and the judge's clock only where the candidate claims to be faster than the baseline (a
        case it does not claim to win earns it nothing to corroborate: its credit is its claim, at most 1.0x), and
        the re-check after timing only when it claims a speedup somewhere. What it credits is never proposed: a
        champion is re-run under the full protocol (``Protocol()``) in fresh processes before anything is
        reported."""
        return cls(case_time_cap_s=0.4, min_rounds=6, target_spread=0.02, window_us=6000.0, max_window_slots=4096,
                   window_rounds=4,
                   profile_every_case=False, window_every_case=False, decisive_margin=0.03,
                   clock_above=1.02, open_slots=256, layout_trials=1, recheck_layout=False, name="search")


def trial_seed(secret: int, trial: int, case_index: int) -> int:
    """A seed for one use (``trial`` names it) of one case, from the judge's secret through a keyed hash: no
    seed a worker is sent tells it anything about the secret or about any other seed (an affine mix did)."""
    digest = hashlib.blake2b(f"{trial}:{case_index}".encode(), digest_size=8,
                             key=(int(secret) % 2**128).to_bytes(16, "little")).digest()
    return int.from_bytes(digest, "little") % (2**63)


def nbytes_of(values) -> int:
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        return sum(nbytes_of(v) for v in values)
    return values.numel() * values.element_size() if isinstance(values, torch.Tensor) else 0


def moved_bytes(inputs: dict, outputs, written: list, aliased: list | None = None) -> int:
    """Bytes a call reads and writes, about: its inputs, its outputs and what it writes in place. An output that
    shares memory with an input (``return a, b, c`` with ``a`` and ``b`` the inputs, or ``x.add_(y); return x``) is
    that input handed back and is not counted again: ``aliased``, one flag per output tensor, is what the trusted
    oracle says of its own outputs (runners/worker.py ``aliased_outputs``); without it every output counts. (An
    honest Liger kernel read 7 TB/s, above the bandwidth bound, when its inputs handed back were counted.)"""
    from .compare import flatten

    outs = [t for t in flatten(outputs) if isinstance(t, torch.Tensor)]
    if not (isinstance(aliased, list) and len(aliased) == len(outs) and all(type(a) is bool for a in aliased)):
        aliased = [False] * len(outs)
    return nbytes_of(inputs) + sum(nbytes_of(t) for t, a in zip(outs, aliased) if not a) + nbytes_of(written)


class Refusal(Exception):
    """The candidate is refused at ``stage`` for ``reason``."""

    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage, self.reason = stage, reason


class Quarantine(Refusal):
    """The judge's clock disagreed with the candidate's claimed time. The candidate's outputs were not found
    wrong, so the judge still re-checks them after the timing (``evaluate``): a kernel that is wrong once timed
    is reported as wrong, which is the cause a search can act on, not as a disagreement of clocks."""

    def __init__(self, reason: str):
        super().__init__("timing", reason)


def meta_nbytes(meta) -> int:
    if isinstance(meta, dict) and meta.get("kind") == "tensor":
        return int(meta.get("nbytes", 0))
    return sum(meta_nbytes(m) for m in children(meta))


def commitment_of(out, key: int = 0) -> int:
    """The commitment of one slot's outputs (runners/commitments.py ``commitments``), recomputed by the judge where the
    outputs are (the CPU): the same integer the worker computed on its device."""
    from .commitments import commitments

    return commitments([out], key)[0]


