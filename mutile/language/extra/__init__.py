"""``ml.extra``: Triton's ``triton.language.extra``. ``libdevice`` maps CUDA's (and MUSA's)
libdevice names onto mutile's math; ``extra.cuda.libdevice`` and ``extra.musa.libdevice``
are the same module under the vendor import paths published kernels use."""
from . import libdevice
from . import cuda, musa

__all__ = ["libdevice", "cuda", "musa"]
