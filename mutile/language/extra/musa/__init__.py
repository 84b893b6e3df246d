"""``ml.extra.musa``: the ``triton.language.extra.musa`` import path of Moore Threads'
Triton; its ``libdevice`` is :mod:`mutile.language.extra.libdevice`."""
from . import libdevice

__all__ = ["libdevice"]
