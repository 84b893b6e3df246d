"""Reference kernel templates (installed as mutile.kernels)."""
