"""Candidates as another user: the mechanism, on this machine (tests run as root here, as in CI)."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from runners.isolation import Isolation

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root can run a process as another user")


def test_an_unreadable_interpreter_keeps_candidates_as_the_judges_user(tmp_path):
    secret = tmp_path / "private"
    secret.mkdir(mode=0o700)
    (secret / "python").write_text("")
    iso = Isolation.choose([secret / "python"])
    assert not iso.active and "cannot be read by other users" in iso.reason and "own user" in iso.describe


def test_two_free_users_taken_in_turn_and_their_leftovers_killed(tmp_path):
    iso = Isolation.choose([Path("/usr/bin/env")])
    assert iso.active and iso.uid != iso.other
    first, second = iso.next_uid(), iso.next_uid()
    assert first != second and iso.next_uid() == first  # the spare never shares the candidate's user
    folder = tmp_path / "cand"
    (folder / "work").mkdir(parents=True)
    Isolation.hand_over(folder, first)
    assert (folder / "work").stat().st_uid == first
    # a process of that user that left its group (what an escaped child looks like) is found and killed
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True, **Isolation.popen_args(first))
    try:
        time.sleep(0.2)
        assert Isolation.kill_leftovers(first) >= 1
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()


def test_another_user_cannot_write_the_judges_files(tmp_path):
    iso = Isolation.choose([Path("/usr/bin/env")])
    target = tmp_path / "judge-file"
    target.write_text("judge")
    os.chmod(tmp_path, 0o755)
    result = subprocess.run(["sh", "-c", f"echo forged > {target}"], capture_output=True, text=True,
                            **Isolation.popen_args(iso.uid))
    assert result.returncode != 0 and target.read_text() == "judge"


def test_a_deployment_can_require_isolation(monkeypatch, rms_bundle):
    from runners.sandbox import Evaluator, IsolationRequired

    monkeypatch.setenv("KS_REQUIRE_ISOLATION", "1")
    monkeypatch.setenv("KS_ISOLATION", "off")
    with pytest.raises(IsolationRequired, match="KS_REQUIRE_ISOLATION=1, but candidates ran as the judge's own user"):
        Evaluator(rms_bundle, "interpret", spare=False)


def test_evaluators_started_together_never_share_a_user():
    from runners.isolation import release

    first, second = Isolation.choose([Path("/usr/bin/env")]), Isolation.choose([Path("/usr/bin/env")])
    try:
        assert first.active and second.active
        assert not {first.uid, first.other} & {second.uid, second.other}  # each kills its users' processes
    finally:
        for uid in (first.uid, first.other, second.uid, second.other):
            release(uid)


def test_what_a_finished_candidates_user_left_in_the_shared_scratch_folders_is_removed(tmp_path):
    """runners/litter.py: files and folders of the candidate's user in /dev/shm and /tmp (and in a folder there that
    every user may write) are removed after its processes; the judge's own files there, and another user's, stay."""
    from runners import litter
    from runners.wire import shm_root

    iso = Isolation.choose([Path("/usr/bin/env")])
    assert iso.active
    stamp = f"{os.getpid()}-{time.monotonic_ns()}"
    shared = Path("/tmp") / f"ks-open-{stamp}"  # a folder every user may write, the judge's
    shared.mkdir()
    os.chmod(shared, 0o1777)
    mine = shm_root() / f"ks-judges-{stamp}"
    mine.write_text("judge")
    theirs = [shm_root() / f"ks-litter-{stamp}", Path("/tmp") / f"ks-litter-dir-{stamp}", shared / "deep"]
    script = (f"head -c 65536 /dev/zero > {theirs[0]} && mkdir {theirs[1]} && echo x > {theirs[1]}/f && "
              f"mkfifo {shared}/deep")
    try:
        result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, **Isolation.popen_args(iso.uid))
        assert result.returncode == 0, result.stderr
        assert all(os.lstat(p).st_uid == iso.uid for p in theirs)
        removed = litter.sweep(iso.uid)
        assert not any(os.path.lexists(p) for p in theirs), removed
        assert {str(p) for p in theirs} <= set(removed)
        assert mine.read_text() == "judge" and shared.is_dir()
        assert litter.sweep(None) == [] and litter.sweep(os.geteuid()) == []  # nothing as the judge's own user
    finally:
        mine.unlink(missing_ok=True)
        for p in theirs:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            elif os.path.lexists(p):
                os.unlink(p)
        shared.rmdir()
        iso.release()
