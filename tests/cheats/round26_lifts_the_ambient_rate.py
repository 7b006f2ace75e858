"""Cheat (round 26), the helper: a process that sleeps 1 us at a time with a timer slack of 1 ns on one core (round 24's
B helper, about 40 timer interrupts a ms on this VM), here running while an evaluator starts.

runners/sandbox.py takes the machine's interrupt rate once, over 30 ms of sleep, in ``Evaluator.__init__``
(``interrupts.ambient``), and runners/interrupts.py ``storm`` then counts the candidate's own rate up to that
ambient rate (not only up to ``CANDIDATE_CAP_PER_MS``) for the evaluator's whole life, a job of hours. Whatever runs
on the machine during those 30 ms lifts the cap for every candidate after: a candidate of another job on the host
(evaluators started together each claim uids of their own, runners/isolation.py, and none stops the others'), or,
without the uid wall, a helper a previous job's candidate left in a session of its own (only its process group is
killed). With the cap at about 40 a ms, round 24's B is back: a candidate whose own helper makes its rounds noisy lets
5 + 2 x 40 = 85 a ms through the oracle's rounds.

Usage: python round26_lifts_the_ambient_rate.py CORE (runs until killed; prints "ready" once pinned)."""
import ctypes
import os
import sys


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def main() -> None:
    os.sched_setaffinity(0, {int(sys.argv[1])})
    libc = ctypes.CDLL(None)
    libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK: 1 ns
    nap = _Timespec(0, 1000)
    os.write(1, b"ready\n")
    while True:
        libc.nanosleep(ctypes.byref(nap), None)


if __name__ == "__main__":
    main()
