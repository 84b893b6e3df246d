"""One module per execution unit of the simulated machine (ALU/SFU/CVT, LSU, ATOM,
warp-wide rows and control, AsyncBarriers, TME, SQMMA, debug rows), each entering its rows'
builders in the registry of :mod:`..rows`; importing this package enters them all. Import
:mod:`..rows`, :mod:`..memory` and :mod:`...isa`; :mod:`..scheduler` imports this package."""
from . import alu, atomic, barriers, debug, lsu, sqmma, tme, warp  # noqa: F401
