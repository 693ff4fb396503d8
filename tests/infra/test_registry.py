"""The one lazy registry (benchmark.infra.registry): lazy entries, did-you-mean, file plugins and their errors,
and the four registries built on it (defenses, transformations, attacks, datasets)."""
import sys
import textwrap

import pytest

from benchmark.errors import BenchError
from benchmark.infra.registry import Accepts, Registry

NUMBERS = Accepts(lambda v: isinstance(v, int) and not isinstance(v, bool), what="int", found="Ints",
                  fix="define an int")


def _write(path, body: str):
    path.write_text(textwrap.dedent(body))
    return path


def test_entries_are_imported_on_first_use_only(tmp_path, monkeypatch):
    _write(tmp_path / "lazy_entry_mod.py", "VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("number", {"answer": "lazy_entry_mod:VALUE"}, NUMBERS)
    assert reg.names() == ["answer"] and "lazy_entry_mod" not in sys.modules
    assert reg.get("answer") == 41 and "lazy_entry_mod" in sys.modules


def test_unknown_names_suggest_the_closest():
    reg = Registry("number", {"answer": "x:Y", "other": "x:Z"}, NUMBERS)
    with pytest.raises(BenchError, match="Unknown number 'anser'. Did you mean 'answer'\\? Valid: answer, other"):
        reg.get("anser")


def test_a_file_plugin_loads_and_records_its_path_and_sha256(tmp_path):
    import hashlib

    f = _write(tmp_path / "nums.py", "SEVEN = 7\nNAME = 'x'\n")
    reg = Registry("number", {}, NUMBERS)
    assert reg.get(f"{f}:SEVEN") == 7
    prov = reg.provenance(f"{f}:SEVEN")
    assert prov == {"kind": "number", "ref": f"{f}:SEVEN", "path": str(f.resolve()),
                    "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
    f.write_text("SEVEN = 8\n")  # a changed file is loaded again
    assert reg.get(f"{f}:SEVEN") == 8


@pytest.mark.parametrize("ref, message", [
    ("{d}/missing.py:X", "number file .*missing.py does not exist"),
    ("{d}/missing.py", "does not exist \\(a file-based number is given as path/to/file.py:Name\\)"),
    ("{d}/nums.py", "exists; name the number as .*nums.py:SEVEN. Ints found in it: SEVEN."),
    ("{d}/nums.py:EIGHT", "'.*nums.py' has no attribute 'EIGHT' \\(number .*\\). Ints found in it: SEVEN."),
    ("{d}/nums.py:NAME", "is not a int. Ints found in it: SEVEN."),
    ("{d}/broken.py:X", "cannot import number .*broken.py:X': ZeroDivisionError"),
    ("{d}/empty.py:X", "has no attribute 'X' .* It defines no int \\(define an int\\)."),
])
def test_bad_plugins_get_one_clear_error(tmp_path, ref, message):
    _write(tmp_path / "nums.py", "SEVEN = 7\nNAME = 'x'\n")
    _write(tmp_path / "broken.py", "1 / 0\n")
    _write(tmp_path / "empty.py", "\n")
    with pytest.raises(BenchError, match=message):
        Registry("number", {}, NUMBERS).get(ref.format(d=tmp_path))


def test_override_and_alias():
    reg = Registry("number", {"answer": "x:Y"}, NUMBERS)
    with reg.override("answer", 1):
        assert reg.get("answer") == 1 and reg.provenance("answer") is None
    with pytest.raises(BenchError, match="is named 'answer', which is a registered number"):
        reg.alias("answer", "f.py:A")
    reg.alias("mine", "f.py:A")
    reg.alias("mine", "g.py:B")  # the latest wins
    assert reg.aliases() == {"mine": "g.py:B"}


TRANSFORM = """
    from dataclasses import dataclass

    from benchmark.transformations.base import Transformation


    @dataclass(frozen=True)
    class Darken(Transformation):
        name: str = "darken_test"
        kind: str = "additive"
        low: tuple = (-10.0,)
        high: tuple = (10.0,)

        def _apply(self, x, theta):
            return x - theta[:, 0].view(-1, 1, 1, 1)


    @dataclass(frozen=True)
    class Nameless(Darken):
        name: str = ""


    DARKEN = Darken()
    NOT_ONE = 3
"""


def test_a_transformation_plugin_is_an_instance_or_a_class_named_by_its_name(tmp_path):
    from benchmark.transformations import get_transformation, plugin_provenance, register_plugin

    f = _write(tmp_path / "darken.py", TRANSFORM)
    assert get_transformation(f"{f}:DARKEN").name == "darken_test"
    t = get_transformation(f"{f}:Darken")  # a class is instantiated
    assert type(t).__name__ == "Darken" and t.name == "darken_test"
    assert register_plugin(f"{f}:Darken") == "darken_test"
    assert get_transformation("darken_test").name == "darken_test"  # its name now stands for it
    assert plugin_provenance("darken_test")["path"] == str(f.resolve())
    with pytest.raises(BenchError, match="is not a Transformation instance or subclass. Transformations found in "
                                         "it: DARKEN, Darken, Nameless."):
        get_transformation(f"{f}:NOT_ONE")
    with pytest.raises(BenchError, match="empty `name`"):
        get_transformation(f"{f}:Nameless")
    with pytest.raises(BenchError, match="Did you mean 'rotation'"):
        get_transformation("rotaton")


def test_attack_and_dataset_plugins(tmp_path):
    from attacks import get_attack_class, resolve_settings
    from benchmark.datasets import get_dataset

    f = _write(tmp_path / "plug.py", """
        from attacks.worst_of_k import WorstOfK
        from benchmark.datasets.digits import Digits


        class Corners(WorstOfK):
            name = "corners"
            defaults = {"k": 0}
            from_profile = {}


        class MyDigits(Digits):
            pass
    """)
    assert get_attack_class(f"{f}:Corners").__name__ == "Corners"
    assert resolve_settings({"name": f"{f}:Corners"}) == {"name": f"{f}:Corners", "k": 0}
    with pytest.raises(BenchError, match="is not a subclass of attacks.base.ParameterAttack"):
        get_attack_class(f"{f}:MyDigits")
    assert get_dataset(f"{f}:MyDigits").name == "digits"
    with pytest.raises(BenchError, match="is not a Dataset instance or subclass"):
        get_dataset(f"{f}:Corners")
