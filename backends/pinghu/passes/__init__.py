"""The Pinghu-specific tile-IR passes, tile IR -> Pinghu tile IR: TME pipelining of
descriptor loops and warp specialization (:mod:`.pipeline`), ``dot`` -> SQMMA
(:mod:`.sqmma`). They import :mod:`mutile.ir` and :mod:`mutile.passes.rewrite` only; the
backend's face (:mod:`..kernel`) runs them before :mod:`..codegen`."""
