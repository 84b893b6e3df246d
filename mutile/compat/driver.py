"""``triton.runtime.driver`` under :func:`mutile.as_triton`: ``driver.active`` answers
what published host code asks a GPU driver — the current device (0), the torch device to
allocate on (CPU: mutile's kernels read host memory), the target, and the device's
properties, taken from the Pinghu machine file (the facts the pinghu backend models)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import LaunchError


@dataclass(frozen=True)
class GPUTarget:
    """Triton's target triple: backend name, architecture, warp size."""
    backend: str
    arch: int
    warp_size: int


class HostDevice:
    """The device ``get_active_torch_device()`` names when torch is not installed: like
    ``torch.device("cpu")``, its ``type`` is "cpu", its ``index`` None, and it prints as
    (and equals) "cpu"."""
    type, index = "cpu", None

    def __str__(self):
        return self.type

    def __repr__(self):
        return f"device(type='{self.type}')"

    def __eq__(self, other):
        return str(other) == self.type

    def __hash__(self):
        return hash(self.type)


def _machine():
    """The Pinghu machine parameters (imported when first asked for)."""
    return importlib.import_module("mutile.backends.pinghu.machine.device").PINGHU


class _Utils:
    def get_device_properties(self, device=None) -> dict:
        """Triton's keys that the machine file has facts for: ``multiprocessor_count``,
        ``max_shared_mem`` (bytes per block), ``max_num_regs`` (32-bit registers per MP),
        ``warpSize`` and ``sm_clock_rate`` (kHz). (It has no memory clock or bus width:
        no ``mem_clock_rate``, ``mem_bus_width``.)"""
        _check_device(device)
        m = _machine()
        return {"multiprocessor_count": m.mp_count, "max_shared_mem": m.shared_bytes,
                "max_num_regs": m.register_file, "warpSize": m.warp_size,
                "sm_clock_rate": int(m.clock_hz / 1e3)}


class _DeviceInterface:
    """What ``driver.active.get_device_interface()`` returns (``torch.cuda``'s role):
    launches are synchronous, so there is nothing to wait for."""

    @staticmethod
    def synchronize(device=None):
        return None

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True


def _check_device(device):
    index = getattr(device, "index", device)        # a torch.device('cpu') has index None
    if index not in (None, 0):
        raise LaunchError(f"device {device!r}: mutile has one device, 0")


class HostDriver:
    """The active driver: one device (0), synchronous launches, no streams."""
    utils = _Utils()

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        _check_device(device)

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("musa", 31, _machine().warp_size)

    def get_active_torch_device(self):
        """``torch.device("cpu")`` when torch is installed, else a :class:`HostDevice`."""
        try:
            import torch
        except ImportError:
            return HostDevice()
        return torch.device("cpu")

    def get_device_interface(self):
        return _DeviceInterface()

    def get_benchmarker(self):
        from ..testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        return None

    def clear_cache(self, cache) -> None:
        return None


class DriverConfig:
    """``triton.runtime.driver``: ``active`` (the :class:`HostDriver` unless
    ``set_active`` chose another), ``default``, ``reset_active()``."""

    def __init__(self):
        self.default = HostDriver()
        self._active = None

    @property
    def active(self):
        return self._active or self.default

    def set_active(self, driver) -> None:
        self._active = driver

    def reset_active(self) -> None:
        self._active = None


driver = DriverConfig()

__all__ = ["DriverConfig", "GPUTarget", "HostDevice", "HostDriver", "driver"]
