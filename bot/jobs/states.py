"""A job's states, the transitions allowed between them, and the named stages of its pipeline."""
from __future__ import annotations

from enum import Enum


class State(str, Enum):
    queued = "queued"
    preparing = "preparing"
    evolving = "evolving"
    verifying = "verifying"
    publishing = "publishing"
    done = "done"
    no_gain = "no_gain"
    failed = "failed"
    cancelled = "cancelled"


ACTIVE = (State.preparing, State.evolving, State.verifying, State.publishing)
FINAL = (State.done, State.no_gain, State.failed, State.cancelled)
RUNNING = (State.preparing, State.evolving, State.verifying)

# Every move a job may make. `running -> queued` is the resume after a restart of the service.
TRANSITIONS: dict[State, set[State]] = {
    State.queued: {State.preparing, State.cancelled, State.failed},
    State.preparing: {State.evolving, State.verifying, State.failed, State.cancelled, State.queued},
    State.evolving: {State.verifying, State.failed, State.cancelled, State.queued},
    State.verifying: {State.publishing, State.done, State.no_gain, State.failed, State.cancelled, State.queued},
    State.publishing: {State.done, State.failed, State.publishing},
    State.done: set(), State.no_gain: set(), State.failed: set(), State.cancelled: set(),
}

# The pipeline's named stages, in order, and the state each one puts the job in.
STAGES = ("preflight", "bundle", "baseline", "search", "verify", "report", "publish")
STAGE_STATE = {"preflight": State.preparing, "bundle": State.preparing, "baseline": State.preparing,
               "search": State.evolving, "verify": State.verifying, "report": State.verifying,
               "publish": State.publishing}


class TransitionError(RuntimeError):
    pass


def check_transition(current: State | str, new: State | str) -> None:
    current, new = State(current), State(new)
    if current == new and current in RUNNING:
        return
    if new not in TRANSITIONS[current]:
        raise TransitionError(f"a job may not move from {current.value} to {new.value}")
