"""Debug dumps: needs a package that is not installed. Nothing on a kernel's path reaches it."""
import not_installed_profiler  # noqa: F401


def save_tensors(name, tensors):
    not_installed_profiler.save(name, tensors)
