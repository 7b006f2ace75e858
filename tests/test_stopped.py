"""runners/stopped.py: the judge's clock starts the oracle only once every thread of the paused candidate shows as
stopped in /proc (a thread inside a long system call runs on after SIGSTOP: tests/test_judge_attacks_round21.py)."""
import os
import signal
import subprocess
import sys

from runners.stopped import running_threads, wait_stopped

# a worker in a session of its own, with a busy thread and a child in its group
_BUSY = """
import os, threading, time
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
if os.fork() == 0:
    while True:
        time.sleep(0.01)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_paused_group_shows_stopped_and_a_running_one_does_not():
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        running = running_threads(proc.pid)
        # the parent's two threads and the child, none stopped (the busy thread running, the others asleep)
        assert len(running) >= 3 and any(r.endswith(" R") for r in running), running
        assert wait_stopped(proc.pid, None, 0.05)  # never paused: still running at the bound
        os.killpg(proc.pid, signal.SIGSTOP)
        assert wait_stopped(proc.pid, None, 2.0) == []
        os.killpg(proc.pid, signal.SIGCONT)
        assert wait_stopped(proc.pid, None, 0.05)  # running again: not stopped within the bound
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_only_the_group_and_the_user_are_scanned():
    # this test's own group (pytest) is running; a group no process has is empty
    assert running_threads(os.getpgrp())
    assert running_threads(2 ** 22 + 12345) == []


def test_a_group_held_stopped_ran_nothing_and_one_continued_for_a_moment_did():
    """``cpu_times`` before and after the oracle's round (``ran_since``): a group that stayed stopped ran nothing, even
    its busy thread; one continued for a moment and stopped again (as a process's own SIGCONT timer does, round 22) is
    caught by the scheduler's count of its runs, however little CPU it spent; a child that ended meanwhile is caught
    as ended."""
    import time

    from runners.stopped import cpu_times, ran_since

    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        os.killpg(proc.pid, signal.SIGSTOP)
        assert wait_stopped(proc.pid, None, 2.0) == []
        before = cpu_times(proc.pid)
        time.sleep(0.3)
        assert ran_since(before, cpu_times(proc.pid)) == []
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGSTOP)
        assert wait_stopped(proc.pid, None, 2.0) == []
        ran = ran_since(before, cpu_times(proc.pid))
        assert ran and "put on a CPU again" in ran[0], ran
        child = next(int(k[0]) for k in before if int(k[0]) != proc.pid)
        os.kill(child, signal.SIGKILL)
        time.sleep(0.1)
        again = cpu_times(proc.pid)
        assert any("ended" in r for r in ran_since(before, again)), ran_since(before, again)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
