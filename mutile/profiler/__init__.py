"""The profiler (users ' side of the cycle model): being written for issue 12."""
