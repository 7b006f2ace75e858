"""Fixtures for the App's tests: a bare git repository as the remote, the GitHub stand-in on loopback, and
`kernelsmith serve` as a real subprocess (uvicorn, SQLite file) wired to both."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import git
import httpx
import pytest
from conftest import EXAMPLE, ROOT
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github_stub import GitHubStub
from github_stub.recordings import FIXTURES

from bot.app.signature import sign

REPO = "Codertocat/Hello-World"  # the repository of GitHub's example payloads
INSTALLATION = 1
APP_ID = 42
SECRET = "test-webhook-secret"
MAINTAINER, READER = "Codertocat", "reader-rita"
HOOKS = FIXTURES / "github-webhooks"
AUTHOR = git.Actor("A Maintainer", "maintainer@example.com")


def payload(name: str) -> dict:
    return json.loads((HOOKS / name).read_text())


@pytest.fixture(scope="session")
def app_key() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


class Remote:
    """The bare repository that plays GitHub's git side, and a clone a 'maintainer' pushes from."""

    def __init__(self, root: Path):
        self.root = root / "remotes"
        self.bare = self.root / f"{REPO}.git"
        self.bare.parent.mkdir(parents=True)
        git.Repo.init(self.bare, bare=True, initial_branch="master")
        self.work = root / "maintainer"
        shutil.copytree(EXAMPLE, self.work, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        repo = git.Repo.init(self.work, initial_branch="master")
        repo.create_remote("origin", str(self.bare))
        self.commit("the example repository")

    @property
    def url_template(self) -> str:
        return f"file://{self.root}/{{repo}}.git"

    def commit(self, message: str, files: dict[str, str] | None = None, branch: str = "master") -> str:
        repo = git.Repo(self.work)
        for rel, text in (files or {}).items():
            (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.work / rel).write_text(text)
        repo.git.add(A=True)
        sha = repo.index.commit(message, author=AUTHOR, committer=AUTHOR).hexsha
        repo.git.push("origin", f"HEAD:refs/heads/{branch}", "--force")
        return sha

    def sha(self, ref: str) -> str | None:
        try:
            return git.Repo(self.bare).git.rev_parse("--verify", ref)
        except git.GitCommandError:
            return None

    def show(self, ref: str, path: str) -> str:
        return git.Repo(self.bare).git.show(f"{ref}:{path}")


@pytest.fixture
def remote(tmp_path) -> Remote:
    return Remote(tmp_path)


@pytest.fixture
def stub(remote, app_key):
    s = GitHubStub(remote.root, APP_ID, app_key[1]).start()
    s.add_repo(REPO, INSTALLATION)
    s.permissions.update({MAINTAINER: "admin", READER: "read"})
    yield s
    s.stop()
    assert not s.violations, s.violations  # every request matched a call GitHub recorded


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """`kernelsmith serve` in a subprocess, as deployed: configured by environment variables only."""

    def __init__(self, tmp: Path, stub: GitHubStub, remote: Remote, app_key, pipeline: str, **env):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = tmp / "data"
        self.env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp)),
                    "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
                    "KS_WEBHOOK_SECRET": SECRET, "KS_APP_ID": str(APP_ID), "KS_PRIVATE_KEY": app_key[0],
                    "KS_DATA_DIR": str(self.data), "KS_GITHUB_API_URL": stub.url, "KS_GIT_URL": remote.url_template,
                    "KS_PIPELINE": pipeline, "KS_GPUS": "none", "KS_GITHUB_THROTTLE": "0",
                    "KS_STATUS_INTERVAL": "0", "KS_PUBLIC_URL": self.url, "KS_SCAN_TICK": "3600",
                    "TRITON_INTERPRET": "1", **env}
        self.log = tmp / f"serve-{self.port}.log"
        self.proc = None

    def start(self) -> Service:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port",
                                          str(self.port)], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=ROOT, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"kernelsmith serve did not start:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL, as a crash or a lost machine would: no shutdown code runs."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def deliver(self, event: str, body: dict | bytes, delivery: str | None = None, secret: str = SECRET,
                signature: str | None = None) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
                   "X-Hub-Signature-256": signature or sign(secret.encode(), raw),
                   "Content-Type": "application/json"}
        return httpx.post(f"{self.url}/webhook", content=raw, headers=headers, timeout=10)

    def db(self):
        from bot.jobs.store import JobStore, sqlite_url

        return JobStore(sqlite_url(self.data / "kernelsmith.db"))


@pytest.fixture
def serve(tmp_path, stub, remote, app_key):
    started = []

    def start(pipeline: str = "app.pipelines:tiny", **env) -> Service:
        svc = Service(tmp_path, stub, remote, app_key, pipeline, **env).start()
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.stop()


def command(text: str, stub: GitHubStub, login: str = MAINTAINER, kind: str = "User", issue: int = 1) -> dict:
    """GitHub's example issue_comment payload, carrying ``text`` from ``login``; the comment exists in the stub."""
    p = payload("issue_comment/created.with-installation.payload.json")
    cid = stub.add_comment(issue, text, login)
    p["comment"].update(id=cid, body=text)
    p["comment"]["user"]["login"] = login
    p["sender"].update(login=login, type=kind)
    p["issue"]["number"] = issue
    return p


def wait_for(check, timeout: float = 60, interval: float = 0.1, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def settled_status(stub: GitHubStub, job, marker: str = "**done**"):
    """The job's status comment once its last edit is in. The job's state turns final in the store a moment before
    the App edits the comment (the edit is a GitHub call after the transition), so a test that reads the comment as
    soon as the state is final can read the edit before it."""
    wait_for(lambda: marker in stub.comments[job.status_comment_id].body, timeout=30,
             what=f"job {job.id}'s status comment to say {marker}")
    return stub.comments[job.status_comment_id]


def job_state(svc: Service, job_id: int = 1):
    store = svc.db()
    try:
        return store.get(job_id)
    finally:
        store.close()
