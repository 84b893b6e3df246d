"""The op lowerings, one module per family of tile-IR ops; each enters its functions in the
``@lowers`` registry of :mod:`..context`. Import :mod:`..context`, :mod:`..values`,
:mod:`..recipe` and :mod:`...isa`; :mod:`..generate` imports them all (filling the registry)."""
