"""``ml.extra.cuda``: Triton's ``triton.language.extra.cuda`` import path; its
``libdevice`` is :mod:`mutile.language.extra.libdevice`."""
from . import libdevice

__all__ = ["libdevice"]
