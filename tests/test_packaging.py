"""Every package folder of the source tree is installed (pyproject.toml lists it), so a
non-editable install has all the code the checkout has."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = {"mutile": "mutile", "backends": "mutile.backends", "grammar": "mutile.grammar",
       "kernels": "mutile.kernels"}


def _source_packages():
    found = set()
    for folder, name in TOP.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]) if rel.parts else name)
    return found


def test_every_package_is_installed():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    missing = _source_packages() - listed
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    for name, folder in conf["package-dir"].items():
        assert (ROOT / folder / "__init__.py").exists(), f"{name} -> {folder} has no __init__.py"


def test_grammars_are_package_data():
    from importlib import resources
    for g in (ROOT / "grammar").glob("*.lark"):
        assert resources.files("mutile.grammar").joinpath(g.name).read_text() == g.read_text()
