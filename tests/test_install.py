"""docs/install.md's CPU-only install names the same torch/torchvision versions that pyproject.toml pins, and the
pins accept the CPU builds (a local version label such as ``+cpu``), so pip keeps them."""
import re
import tomllib

from packaging.requirements import Requirement

from tests.repo import REPO


def _pins() -> dict[str, Requirement]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {r.name: r for r in map(Requirement, deps) if r.name in ("torch", "torchvision")}


def test_readme_cpu_install_matches_the_pins():
    line = next(x for x in (REPO / "docs" / "install.md").read_text().splitlines() if "whl/cpu" in x)
    named = dict(re.findall(r"\b(torch|torchvision)==([0-9][0-9.]*)", line))
    pins = _pins()
    assert set(named) == {"torch", "torchvision"}
    for name, version in named.items():
        assert str(pins[name].specifier) == f"=={version}", (name, version, pins[name])


def test_pins_accept_cpu_builds():
    for name, req in _pins().items():
        exact = str(req.specifier).removeprefix("==")
        assert req.specifier.contains(f"{exact}+cpu"), name
        assert not req.specifier.contains(exact + ".1"), name  # still an exact pin
