"""sglite: a small serving engine's kernel package (example target for kernelsmith)."""
from sglite.version import __version__  # noqa: F401
