"""Imports only point down: ``lint-imports`` (import-linter) keeps the layer contract of pyproject.toml, and
no module of benchmark/, baselines/ or attacks/ is in an import cycle (a lazy import inside a function that
closes a cycle still couples the two modules both ways)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import grimp

from tests.repo import REPO


def import_graph(*packages: str) -> dict[str, set[str]]:
    """module -> the modules it imports directly, from grimp (import-linter's graph), which counts every import
    statement, also those inside functions and under ``TYPE_CHECKING``."""
    graph = grimp.build_graph(*packages)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_detector_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    graph = import_graph("benchmark", "baselines", "attacks")
    assert "benchmark.run.plan" in graph["benchmark.run.driver"]
    assert cycles(graph) == []


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "lint-imports not installed: pip install -e '.[test]'"
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": str(Path(sys.executable).parent)})


def test_layers_kept():
    res = _lint_imports(REPO)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in res.stdout


def test_the_face_contract_names_every_module_but_the_face():
    """The forbidden contract lists every top-level module of benchmark/ except ``benchmark.api``, so a new
    module cannot become importable by defenses and attacks by omission."""
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (face,) = [c for c in cfg if c["type"] == "forbidden"]
    assert face["source_modules"] == ["baselines", "attacks"]
    root = REPO / "benchmark"
    modules = {f"benchmark.{p.stem}" for p in root.glob("*.py") if p.stem != "__init__"}
    modules |= {f"benchmark.{p.name}" for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert set(face["forbidden_modules"]) == modules - {"benchmark.api"}
    assert "benchmark.api" not in face["forbidden_modules"]


def test_an_import_past_the_face_breaks_the_contract(tmp_path):
    """The same kind of contract on a toy package: a defense importing an internal module directly fails it,
    one importing the face (which imports that module) passes."""
    pkg = tmp_path / "toy"
    for sub in ("internal", "defenses"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "internal" / "rule.py").write_text("x = 1\n")
    (pkg / "api.py").write_text("from toy.internal.rule import x\n")
    (pkg / "defenses" / "mine.py").write_text("from toy.api import x\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.importlinter]
        root_packages = ["toy"]
        [[tool.importlinter.contracts]]
        name = "toy face"
        type = "forbidden"
        source_modules = ["toy.defenses"]
        forbidden_modules = ["toy.internal"]
        allow_indirect_imports = "True"
    """))
    assert _lint_imports(tmp_path).returncode == 0
    (pkg / "defenses" / "sneaky.py").write_text("def f():\n    from toy.internal import rule\n    return rule\n")
    res = _lint_imports(tmp_path)
    assert res.returncode != 0 and "toy.defenses.sneaky -> toy.internal" in res.stdout, res.stdout


def test_an_import_up_the_layers_breaks_the_contract(tmp_path):
    """The same kind of contract on a two-layer toy package: one lazy import up the layers fails it."""
    pkg = tmp_path / "toy"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("from toy.low import thing\n")
    (pkg / "low" / "__init__.py").write_text("thing = 1\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.importlinter]
        root_packages = ["toy"]
        [[tool.importlinter.contracts]]
        name = "toy layers"
        type = "layers"
        layers = ["toy.high", "toy.low"]
    """))
    assert _lint_imports(tmp_path).returncode == 0
    (pkg / "low" / "back.py").write_text("def f():\n    from toy import high\n    return high\n")
    res = _lint_imports(tmp_path)
    assert res.returncode != 0 and "toy.low.back -> toy.high" in res.stdout, res.stdout
