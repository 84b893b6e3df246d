"""The GEMM templates' public names, re-exported by ``mutile.kernels``: ``gemm``
(kernels/gemm.py, with its explicit Pinghu path in kernels/gemm_pinghu.py) and the
per-block FP8 GEMM with its quantizers (kernels/fp8_blockwise.py)."""
from .fp8_blockwise import fp8_gemm_blockwise, quantize_act_1x128, quantize_weight_128x128
from .gemm import gemm

__all__ = ["gemm", "fp8_gemm_blockwise", "quantize_act_1x128", "quantize_weight_128x128"]
