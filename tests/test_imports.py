"""The import graph of mutile: every import of ``mutile/``, ``backends/`` and ``kernels/``
(module level and inside functions) is allowed by the layer table of ``docs/layers.md``, and
no modules import one another in a circle."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"mutile": "mutile", "backends": "mutile.backends", "kernels": "mutile.kernels"}


def modules(repo: Path = REPO) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package), with backends/ and kernels/ under ``mutile.``."""
    out = {}
    for folder, prefix in ROOTS.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts.pop()
            out[".".join([prefix, *parts])] = (path, is_pkg)
    return out


def imports(mods: dict) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from pkg import sub`` counts as ``sub``;
    ``importlib.import_module("literal")`` counts too)."""
    graph = {}
    for name, (path, is_pkg) in mods.items():
        pkg = name if is_pkg else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in mods:
                        deps.add(sub)
                    elif target in mods:
                        deps.add(target)
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)
                  and node.args[0].value in mods):
                deps.add(node.args[0].value)
        deps.discard(name)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def layer_table(doc: Path = REPO / "docs" / "layers.md") -> tuple[dict, dict]:
    """``docs/layers.md``'s table: (module prefix -> layer, layer -> layers it may import)."""
    prefixes, allowed = {}, {}
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`"):
            continue
        layer, mods, may = cells
        for m in re.findall(r"`([\w.]+)`", mods):
            prefixes[m] = layer
        allowed[layer] = {x.strip() for x in may.split(",") if x.strip()}
    return prefixes, allowed


def layer_of(module: str, prefixes: dict) -> str | None:
    best = max((p for p in prefixes if module == p or module.startswith(p + ".")),
               key=len, default=None)
    return prefixes.get(best)


def violations(graph: dict, prefixes: dict, allowed: dict) -> list[str]:
    bad = []
    for a in sorted(graph):
        la = layer_of(a, prefixes)
        for b in sorted(graph[a]):
            lb = layer_of(b, prefixes)
            if lb != la and lb not in allowed[la]:
                bad.append(f"{a} ({la}) imports {b} ({lb})")
    return bad


GRAPH = imports(modules())
PREFIXES, ALLOWED = layer_table()


def test_the_parser_sees_the_imports():
    # a known module-level, relative and function-level import each
    assert "mutile.ir.core" in GRAPH["mutile.ir.printer"]
    assert "mutile.backends.pinghu.isa.instr" in GRAPH["mutile.backends.pinghu.isa.table"]
    assert "mutile.backends.pinghu.machine.scheduler" in GRAPH["mutile.backends.pinghu.kernel"]
    assert len(GRAPH) > 100


def test_no_import_circles():
    assert circles(GRAPH) == []


def test_every_module_has_a_layer():
    assert [m for m in GRAPH if layer_of(m, PREFIXES) is None] == []
    assert set().union(*ALLOWED.values()) <= set(ALLOWED), "a row names an unknown layer"


def test_imports_follow_the_layers():
    assert violations(GRAPH, PREFIXES, ALLOWED) == []


def test_isa_is_the_floor_of_pinghu():
    for m, deps in GRAPH.items():
        if layer_of(m, PREFIXES) == "pinghu.isa":
            assert not any(d.startswith("mutile.backends.pinghu.") and
                           layer_of(d, PREFIXES) != "pinghu.isa" for d in deps), m


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_circles_finds_every_cycle(graph, expected):
    assert sorted(circles(graph)) == expected


def test_a_planted_circle_and_an_upward_import_are_caught(tmp_path):
    """The checks fail on a copy of the tree with a function-level import of the machine's
    parameters from the ISA table: upward, and a circle (``device`` imports the ISA)."""
    for folder in ROOTS:
        for src in (REPO / folder).rglob("*.py"):
            dst = tmp_path / src.relative_to(REPO)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(src.read_text())
    table = tmp_path / "backends" / "pinghu" / "isa" / "table.py"
    table.write_text(table.read_text() + "\n\ndef _late():\n"
                     "    from ..machine.device import PINGHU\n    return PINGHU\n")
    graph = imports(modules(tmp_path))
    assert any("mutile.backends.pinghu.isa.table" in c for c in circles(graph))
    upward = ("mutile.backends.pinghu.isa.table (pinghu.isa) imports "
              "mutile.backends.pinghu.machine.device (pinghu.machine)")
    assert upward in violations(graph, PREFIXES, ALLOWED)
