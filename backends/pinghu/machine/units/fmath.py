"""Vectorized math the interpreter needs beyond numpy's ufuncs.

* :func:`fma_f32`, :func:`fma_f64`: ``a * b + c`` rounded once (from
  :mod:`mutile.ir.fma`, the one definition mutile uses).
* :func:`erf_f64`: fdlibm's ``s_erf.c`` (the algorithm glibc's ``erf`` uses) written
  over arrays; within 1 ulp of ``math.erf``, and in practice equal to it.
"""
from __future__ import annotations

import numpy as np

from mutile.ir.fma import fma_f32, fma_f64  # noqa: F401  (re-exported for the ops table)

_EFX, _EFX8, _ERX = 1.28379167095512586316e-01, 1.02703333676410069053e+00, \
    8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
       5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
       7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
       1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)


def _poly(coeffs, z):
    """c0 + z*(c1 + z*(c2 + ...)) in fdlibm's evaluation order."""
    acc = coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = c + z * acc
    return acc


def erf_f64(x):
    """erf of an f64 array, evaluated as fdlibm does, branch by branch over the array."""
    with np.errstate(all="ignore"):
        return _erf(np.asarray(x, np.float64))


def _erf(x):
    ix = (x.view(np.uint64) >> np.uint64(32)).astype(np.int64) & 0x7FFFFFFF
    neg = np.signbit(x)
    ax = np.abs(x)
    # |x| < 0.84375
    z = x * x
    small = x + x * (_poly(_PP, z) / _poly(_QQ, z))
    small = np.where(ix < 0x3E300000, np.where(ix < 0x00800000, 0.125 * (8.0 * x + _EFX8 * x),
                                               x + _EFX * x), small)
    # 0.84375 <= |x| < 1.25
    s = ax - 1.0
    pq = _poly(_PA, s) / _poly(_QA, s)
    mid = np.where(neg, -_ERX - pq, _ERX + pq)
    # 1.25 <= |x| < 6
    s = 1.0 / (ax * ax)
    lo_rs = _poly(_RA, s) / _poly(_SA, s)
    hi_rs = _poly(_RB, s) / _poly(_SB, s)
    rs = np.where(ix < 0x4006DB6E, lo_rs, hi_rs)
    zz = (ax.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
    r = np.exp(-zz * zz - 0.5625) * np.exp((zz - ax) * (zz + ax) + rs)
    tail = np.where(neg, r / ax - 1.0, 1.0 - r / ax)
    out = np.where(ix < 0x3FEB0000, small, np.where(ix < 0x3FF40000, mid, tail))
    out = np.where(ix >= 0x40180000, np.where(neg, -1.0, 1.0), out)
    return np.where(np.isnan(x), x, out)
