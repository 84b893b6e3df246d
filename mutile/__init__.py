"""mutile: a tile DSL and compiler for Pinghu GPUs with an llvmlite CPU JIT."""
