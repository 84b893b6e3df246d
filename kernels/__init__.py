"""Reference kernel templates (installed as mutile.kernels)."""
from .gemm_public import fp8_gemm_blockwise, gemm, quantize_act_1x128, quantize_weight_128x128  # noqa: F401,E501
from .attention_public import BlockMask, create_block_mask, flash_attention, flash_attention_backward  # noqa: F401,E501
