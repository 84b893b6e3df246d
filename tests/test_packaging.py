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


def test_the_suite_never_uses_the_home_cache():
    """tests/conftest.py gives the whole run one temporary cache directory, whatever the
    caller's environment says, and clears the caller's MUTILE_* switches."""
    import os
    import tempfile

    from mutile.runtime import cache
    d = cache.cache_dir().resolve()
    assert not d.is_relative_to(Path.home().resolve() / ".cache"), d
    assert d.is_relative_to(Path(tempfile.gettempdir()).resolve()), d
    assert d.name.startswith("mutile-test-cache-"), d
    leaked = [n for n in os.environ if n.startswith("MUTILE_")
              and n not in ("MUTILE_CACHE_DIR", "MUTILE_TEST_SEED")]
    assert not leaked, f"caller's switches reach the tests: {leaked}"
