"""The attention templates' public names re-exported by ``mutile.kernels``:
``flash_attention`` (:mod:`.attention`), ``flash_attention_backward``, the block mask.
The older single-kernel forward is :mod:`mutile.kernels.attention_basic`."""
from .attention import flash_attention
from .attention_bwd import flash_attention_backward
from .block_mask import BlockMask, create_block_mask

__all__ = ["BlockMask", "create_block_mask", "flash_attention", "flash_attention_backward"]
