"""The face (benchmark/api.py): what defenses and attacks import, and the deprecated paths kept for one release."""
from __future__ import annotations

import ast
import importlib
import sys
import warnings

import pytest

from tests.repo import REPO


def test_every_name_of_the_face_resolves():
    import benchmark.api as api

    missing = [n for n in api.__all__ if not hasattr(api, n)]
    assert missing == []
    assert len(set(api.__all__)) == len(api.__all__)


def test_defenses_and_attacks_import_only_the_face():
    """Every import of a benchmark module in baselines/ and attacks/ (also inside functions) is the face."""
    bad = []
    for root in ("baselines", "attacks"):
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                mods = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                bad += [f"{path.relative_to(REPO)}:{node.lineno} {m}" for m in mods
                        if m.split(".")[0] == "benchmark" and m != "benchmark.api"]
    assert bad == []


def _fresh_import(module: str):
    for name in [m for m in sys.modules if m == module]:
        del sys.modules[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = importlib.import_module(module)
    return mod, [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_the_earlier_template_imports_still_work_with_a_deprecation_warning():
    """Every name the submission template imported before the layout change (benchmark/models/recipes.py moved
    to benchmark/recipes.py) still imports; the moved path warns once, pointing at the new one."""
    from benchmark.certify.smoothing import predict  # noqa: F401  (the template's imports, verbatim)
    from benchmark.defense import Certificate, Context, Defense, parameter_sampler, parameter_smoothing  # noqa: F401
    from benchmark.transformations.base import Transformation  # noqa: F401

    recipes, caught = _fresh_import("benchmark.models.recipes")
    from benchmark.recipes import classifier_spec

    assert recipes.classifier_spec is classifier_spec
    assert len(caught) == 1 and "benchmark.recipes" in str(caught[0].message)


def test_a_defense_file_written_against_the_earlier_template_loads(tmp_path):
    """The template of the previous release, as a user would have copied it, loads as a plugin defense."""
    src = (REPO / "benchmark" / "submission" / "template_defense.py").read_text()
    tree = ast.parse(src)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "benchmark.api"
             for a in n.names}
    old = [
        "from benchmark.certify.smoothing import predict",
        "from benchmark.defense import Certificate, Context, Defense, parameter_sampler, parameter_smoothing",
        "from benchmark.models.recipes import classifier_spec",
        "from benchmark.transformations.base import Transformation",
    ]
    assert names <= {"predict", "Certificate", "Context", "Defense", "parameter_sampler", "parameter_smoothing",
                     "classifier_spec", "Transformation"}, "the template imports more than the earlier one did"
    face = next(n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "benchmark.api")
    lines = src.splitlines()
    del lines[face.lineno - 1:face.end_lineno]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("import torch"))
    path = tmp_path / "old_template.py"
    path.write_text("\n".join(lines[:at + 1] + [""] + old + lines[at + 1:]) + "\n")
    from benchmark.defenses import get_defense_class

    sys.modules.pop("benchmark.models.recipes", None)
    with pytest.warns(DeprecationWarning, match="benchmark.recipes"):
        cls = get_defense_class(f"{path}:{_class_name(tree)}")
    assert cls.__name__ == _class_name(tree)


def _class_name(tree: ast.Module) -> str:
    return next(n.name for n in tree.body if isinstance(n, ast.ClassDef))


def test_the_old_noisy_classifier_path_warns():
    mod, caught = _fresh_import("baselines.noisy_classifier")
    from baselines.common.noisy_classifier import NoisyClassifier

    assert mod.NoisyClassifier is NoisyClassifier and len(caught) == 1
