"""Reading environment switches at launch speed (a base-layer module: no imports of
mutile's own).

``os.environ.get(name)`` encodes the name on every call (about a microsecond), and a
launch reads several switches. :func:`key` encodes a name once; :func:`get` looks the
encoded name up in ``os.environ``'s own table, the one ``os.environ.get`` reads (and
which assignments through ``os.environ`` keep current). The values are in that table's
form (bytes on POSIX): use them to compare or as cache keys, not as text.
"""
from __future__ import annotations

import os

_table = getattr(os.environ, "_data", None)
_encode = getattr(os.environ, "encodekey", None)

if isinstance(_table, dict) and _encode is not None:
    key = _encode
    get = _table.get
else:  # pragma: no cover - a platform whose os.environ keeps no such table
    def key(name: str) -> str:
        return name
    get = os.environ.get
