"""The backend seam."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backend:
    name: str  # as given to --backend and written in reports
    device: str  # the torch device type the kernels run on: cuda (also on MACA) | cpu
    timed: bool  # device times mean something (never on the interpreter)
    warp_size: int  # threads per warp (wave): 32 on NVIDIA, 64 on MetaX
    visible_devices: tuple[str, ...] = ()  # variables that pick the GPU, in the order the runtime reads them
    env_set: dict[str, str] = field(default_factory=dict)  # variables every worker gets
    env_drop: tuple[str, ...] = ()  # variables no worker may inherit
    to_confirm: tuple[str, ...] = ()  # facts not yet seen on real hardware of this kind
    # Address-space limit of a worker (bytes), or None. GPU drivers reserve huge virtual ranges, so GPU
    # backends rely on the device's own memory limit and the deadline instead.
    address_space_limit: int | None = None

    def worker_env(self, base: dict[str, str], device_index: int | None = None) -> dict[str, str]:
        """The worker's environment: ``base`` (already scrubbed of secrets) plus this backend's settings.
        ``device_index`` pins one GPU through every visible-devices variable the runtime reads."""
        env = {k: v for k, v in base.items() if k not in self.env_drop}
        env.update(self.env_set)
        if device_index is not None:
            for var in self.visible_devices:
                env[var] = str(device_index)
        return env

    def facts(self) -> dict:
        return {"backend": self.name, "device": self.device, "timed": self.timed, "warp_size": self.warp_size,
                "visible_devices": list(self.visible_devices), "env": dict(self.env_set),
                "to_confirm": list(self.to_confirm)}
