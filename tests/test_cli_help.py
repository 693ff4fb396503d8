"""The CLI explains itself: every option has help, docs/commands.md lists every option, errors read naturally."""
import argparse
import re

import pytest

from benchmark.cli import _parser
from benchmark.errors import BenchError

from tests.repo import REPO

COMMANDS = REPO / "docs" / "commands.md"  # the commands page the README links to


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_of_every_subcommand_has_help_text():
    missing = [f"{name} {a.option_strings or a.dest}" for name, sp in _subcommands().items() for a in sp._actions
               if not isinstance(a, argparse._HelpAction) and not (a.help and a.help.strip())]
    assert not missing, f"options without help: {missing}"


def _readme_commands() -> dict[str, str]:
    block = COMMANDS.read_text().split("# Commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    out: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        m = re.match(r"bench ([a-z0-9-]+)", line)
        if m:
            current = m.group(1)
        if current:
            out[current] = out.get(current, "") + " " + line
    return out


def test_the_readme_lists_every_option_of_every_subcommand():
    readme = _readme_commands()
    for name, sp in _subcommands().items():
        assert name in readme, f"bench {name} is missing from docs/commands.md's block"
        options = {o for a in sp._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
        absent = sorted(o for o in options if not re.search(re.escape(o) + r"\b", readme[name]))
        assert not absent, f"bench {name}: {absent} are not in docs/commands.md"
    assert "--profile smoke|default|paper" in readme["run"]
    assert "--device cpu|cuda|cuda:N|auto" in readme["run"]
    text = COMMANDS.read_text()
    assert "default 0.05" in text and "digits-c" in text and "suite YAML file" in text


def test_profile_is_a_choice_list_and_tolerance_states_its_default():
    sub = _subcommands()
    profile = next(a for a in sub["run"]._actions if "--profile" in a.option_strings)
    assert list(profile.choices) == ["smoke", "default", "paper", "table1", "leaderboard"]  # table1-mnist; corruptions-mnist
    tolerance = next(a for a in sub["verify-entry"]._actions if "--tolerance" in a.option_strings)
    assert "0.05" in tolerance.help
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--profile", "fast"])


def test_unknown_transformation_reads_naturally():
    from benchmark.suites import load_suite

    suite = load_suite("semantic")
    with pytest.raises(BenchError) as err:
        suite.tasks(suite.profile("smoke"), 0, transformations=["rotaton"])
    assert str(err.value).startswith("Unknown transformation 'rotaton' in suite 'semantic'. Did you mean "
                                     "'rotation'? Valid: brightness, contrast_brightness,")


def test_data_root_for_a_dataset_that_ignores_it_is_a_warning(tmp_path):
    from benchmark.run.options import RunOptions
    from benchmark.run.plan import plan_run
    from benchmark.suites import load_suite

    said: list[str] = []
    opts = RunOptions(profile="smoke", data_root=tmp_path, out=tmp_path / "run", log=said.append)
    plan_run(load_suite("semantic"), opts)
    assert any("warning" in m and "--data-root" in m and "digits" in m for m in said), said
    said.clear()
    plan_run(load_suite("semantic"), RunOptions(profile="smoke", out=tmp_path / "run", log=said.append))
    assert not said


def test_every_help_page_renders():
    """``bench --help`` and ``bench CMD --help`` format (a bare % in a help string crashes argparse)."""
    _parser().format_help()
    for name, sp in _subcommands().items():
        assert sp.format_help(), name
