"""A stand-in for GitHub's REST API on loopback, built from the recorded exchanges in
shared/fixtures/github-rest (PyGithub's own recordings of api.github.com), with a bare git repository on
disk as each repository's remote."""
from .server import GitHubStub

__all__ = ["GitHubStub"]
