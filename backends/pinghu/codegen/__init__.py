"""The code generator, tile IR -> ISA program: the driver (:mod:`.generate`), its state and
helpers (:mod:`.context`), the values it works with (:mod:`.values`), index recipes
(:mod:`.recipe`), hoisting and register allocation; one module per op family in
:mod:`.lowering`. Imports :mod:`..isa` and :mod:`mutile.ir`; only :mod:`..kernel` imports it."""
