"""GPU core dumps: a faulting launch's machine state, written to a file and printed later.

With ``MUTILE_COREDUMP=DIR`` set, every :class:`mutile.DeviceFault` a launch raises
(out of bounds, assertion, deadlock, no progress, watchdog, sanitizer) also writes
``DIR/mutile-core-<kernel>-<pid>-<n>.npz``, as MUSA's GPU core dump does for crashes that
are hard to reproduce; the fault's message ends with the file's path. ``mutile coredump
FILE`` prints the report from it, on any machine, without the kernel's source.

What a dump holds comes from two places: the backend attaches ``fault.coredump`` (a
dict; pinghu: every warp's pc and state, the faulting warp's registers and predicates,
shared memory, barrier states, the program; llvm: the program ids, the faulting access)
and the runtime adds ``launch`` (the kernel's qualified name and file, the grid, every
argument's shape and dtype or value, the options) and the Python source line.

File format: a numpy ``.npz`` archive (no pickles). ``meta`` is the UTF-8 JSON of the
dict with every numpy array replaced by ``{"__array__": "a<k>"}``, the array stored as
entry ``a<k>``.
"""
from __future__ import annotations

import itertools
import json
import linecache
import os
import time
from pathlib import Path

import numpy as np

ENV = "MUTILE_COREDUMP"
FORMAT = "mutile-coredump-1"
_counter = itertools.count()


# ---------------------------------------------------------------- writing
def _split(obj, arrays: dict):
    """``obj`` as JSON-able data, its arrays moved into ``arrays``."""
    if isinstance(obj, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = obj
        return {"__array__": name}
    if isinstance(obj, dict):
        return {str(k): _split(v, arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_split(v, arrays) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)


def _join(obj, arrays):
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            return arrays[obj["__array__"]]
        return {k: _join(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join(v, arrays) for v in obj]
    return obj


def _arg_summary(v):
    if isinstance(v, np.ndarray):
        return {"shape": list(v.shape), "dtype": str(v.dtype), "strides": list(v.strides),
                "address": int(v.ctypes.data)}
    if isinstance(v, (bool, int, float, np.generic)):
        return {"value": v.item() if isinstance(v, np.generic) else v}
    return {"type": type(v).__name__}


def launch_record(jitfn, grid, bound: dict, options: dict) -> dict:
    """What the runtime knows of a launch (kept in every dump)."""
    code = jitfn.fn.__code__
    return {"kernel": jitfn.fn.__qualname__, "module": jitfn.fn.__module__,
            "file": code.co_filename, "line": code.co_firstlineno, "grid": list(grid),
            "args": {p: _arg_summary(v) for p, v in bound.items()},
            "options": {k: repr(v) for k, v in options.items()}}


def write(fault, launch: dict, folder: str | os.PathLike) -> Path:
    """Write ``fault``'s core dump into ``folder`` (created if needed); returns the path."""
    dump = dict(getattr(fault, "coredump", None) or {})
    dump.setdefault("backend", launch.get("options", {}).get("backend", "?").strip("'"))
    dump.setdefault("kernel", launch["kernel"])
    dump["message"] = str(fault)
    dump["launch"] = launch
    loc = getattr(fault, "loc", None)
    if loc is not None and getattr(loc, "line", 0) > 0:
        dump["location"] = {"file": loc.file, "line": loc.line, "col": loc.col,
                            "source": linecache.getline(loc.file, loc.line).rstrip("\n")}
    dump["format"] = FORMAT
    dump["time"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    dump["pid"] = os.getpid()
    arrays: dict = {}
    meta = _split(dump, arrays)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(dump["kernel"]))
    path = folder / f"mutile-core-{safe}-{os.getpid()}-{next(_counter)}.npz"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                            **arrays)
    os.replace(tmp, path)
    return path


def write_if_asked(fault, launch_info) -> None:
    """Under ``MUTILE_COREDUMP=DIR``: write the dump and name it in the fault's message.
    ``launch_info`` is a callable returning :func:`launch_record`'s dict (made only then).
    A dump that cannot be written is said so in the message; it never hides the fault."""
    folder = os.environ.get(ENV, "").strip()
    if not folder:
        return
    try:
        path = write(fault, launch_info(), folder)
        note = f"core dump written to {path} (print it with: mutile coredump {path})"
    except Exception as e:
        note = f"core dump NOT written to {folder}: {type(e).__name__}: {e}"
    fault.coredump_note = note
    fault.args = (f"{fault.args[0]}\n{note}",) + tuple(fault.args[1:])


# ---------------------------------------------------------------- reading
class CoredumpError(Exception):
    """The file is not a mutile core dump (or is damaged)."""


def load(path) -> dict:
    """The dump written by :func:`write`, arrays restored."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise CoredumpError(f"{path}: no such file") from None
    except Exception as e:  # a damaged archive of any kind is an error, not a crash
        raise CoredumpError(f"{path}: not a mutile core dump ({e})") from None
    try:
        meta = json.loads(arrays.pop("meta").tobytes().decode())
    except (KeyError, ValueError) as e:
        raise CoredumpError(f"{path}: not a mutile core dump (no readable meta: {e})") from None
    if meta.get("format") != FORMAT:
        raise CoredumpError(f"{path}: unknown core dump format {meta.get('format')!r}")
    return _join(meta, arrays)


def _hex_rows(data: np.ndarray, width: int = 16, limit: int = 64) -> list[str]:
    """Hex dump lines of the non-zero 16-byte rows of ``data`` (uint8)."""
    data = np.asarray(data, np.uint8).ravel()
    out, shown = [], 0
    for off in range(0, data.size, width):
        row = data[off:off + width]
        if not row.any():
            continue
        if shown == limit:
            out.append("  ...")
            break
        out.append(f"  {off:06x}: " + " ".join(f"{b:02x}" for b in row))
        shown += 1
    return out or ["  (all zero)"]


def _registers(regs: np.ndarray, lanes=None, limit: int = 64) -> list[str]:
    regs = np.asarray(regs)
    if regs.ndim != 2:
        return [f"  {regs!r}"]
    lanes = list(range(regs.shape[1])) if lanes is None else list(lanes)
    lanes = lanes[:8]
    out = ["  reg   " + " ".join(f"lane {ln:>2}".rjust(10) for ln in lanes)]
    for r in range(min(regs.shape[0], limit)):
        out.append(f"  R{r:<4} " + " ".join(f"{int(regs[r, ln]) & 0xFFFFFFFF:#010x}"
                                             for ln in lanes))
    if regs.shape[0] > limit:
        out.append(f"  ... ({regs.shape[0] - limit} more registers)")
    return out


def _value(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array {v.dtype}{list(v.shape)}"
    return json.dumps(v) if not isinstance(v, str) else v


def report(dump: dict) -> str:
    """The human report of a dump (what ``mutile coredump FILE`` prints)."""
    L = [f"mutile core dump — {dump.get('backend', '?')} backend, kernel "
         f"'{dump.get('kernel', '?')}', written {dump.get('time', '?')} by pid {dump.get('pid')}",
         "", dump.get("message", "").rstrip(), ""]
    loc = dump.get("location")
    if loc:
        L += [f"Python line: {loc['file']}:{loc['line']}", f"    {loc.get('source', '')}", ""]
    launch = dump.get("launch") or {}
    if launch:
        L.append(f"launch: {launch.get('kernel')} ({launch.get('file')}:{launch.get('line')}) "
                 f"grid {tuple(launch.get('grid', ()))}")
        for name, a in (launch.get("args") or {}).items():
            desc = (f"{a['dtype']}{a['shape']} strides {a['strides']} at {a['address']:#x}"
                    if "dtype" in a else repr(a.get("value", a.get("type"))))
            L.append(f"  {name:<12} {desc}")
        L.append("")
    done = {"backend", "kernel", "time", "pid", "message", "location", "launch", "format"}
    access = dump.get("access")
    if access:
        L.append("faulting access:")
        L += [f"  {k:<12} {_value(v)}" for k, v in access.items()]
        L.append("")
        done.add("access")
    warps = dump.get("warps")
    if warps:
        L.append(f"warps ({len(warps)}):")
        for w in warps[:256]:
            L.append(f"  block {tuple(w.get('block', ()))} warp {w.get('warp')}: "
                     f"{w.get('state')} at pc {w.get('pc')}  {w.get('where', '')}")
        if len(warps) > 256:
            L.append(f"  ... ({len(warps) - 256} more)")
        L.append("")
        done.add("warps")
    f = dump.get("faulting")
    if isinstance(f, dict):
        L.append(f"faulting warp: block {tuple(f.get('block', ()))} warp {f.get('warp')} "
                 f"pc {f.get('pc')} lanes {f.get('lanes')}")
        for k, v in f.items():
            if k in ("block", "warp", "pc", "lanes", "registers"):
                continue
            L.append(f"  {k}: {_value(v) if not isinstance(v, np.ndarray) else v.tolist()}")
        if isinstance(f.get("registers"), np.ndarray):
            lanes = f.get("lanes") if isinstance(f.get("lanes"), list) else None
            L += _registers(f["registers"], lanes)
        L.append("")
        done.add("faulting")
    shared = dump.get("shared")
    if isinstance(shared, np.ndarray):
        L.append(f"shared memory of the faulting block ({shared.size} bytes, non-zero rows):")
        L += _hex_rows(shared)
        L.append("")
        done.add("shared")
    bars = dump.get("barriers")
    if bars:
        L.append("barriers:")
        L += [f"  {b if not isinstance(b, dict) else ', '.join(f'{k} {_value(v)}' for k, v in b.items())}"
              for b in bars]
        L.append("")
        done.add("barriers")
    for k, v in dump.items():
        if k in done or k == "program":
            continue
        L.append(f"{k}: {_value(v)}")
    if dump.get("program"):
        L += ["", "program:", str(dump["program"]).rstrip()]
    return "\n".join(L).rstrip() + "\n"
