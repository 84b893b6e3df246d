"""LLVM (llvmlite) CPU backend for mutile."""
