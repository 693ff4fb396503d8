"""95 % Clopper-Pearson intervals on every leaderboard cell, and the McNemar "best" / "tied" marking."""
from pathlib import Path

import pytest

from benchmark.errors import BenchError
from benchmark.leaderboard.entry import default_root, load_entries, read_rows
from benchmark.leaderboard.formats import render
from benchmark.leaderboard.render import certified_table, corruptions_table
from benchmark.reports.cells import cell_flags
from benchmark.reports.intervals import clopper_pearson
from tests.entry_rows import attach_rows

N = 25


def _entry(name, cells, n=N, certified=True):
    """cells: (transformation, label, budget, certified, empirical, extra)."""
    labels = list(dict.fromkeys(c[1] for c in cells))
    results = [{"transformation": t, "label": lab, "budget": b, "clean_accuracy": 0.9, "certified_accuracy": c,
                "empirical_accuracy": e, "abstain_rate": 0.0, "n_examples": n, **extra}
               for (t, lab, b, c, e, extra) in cells]
    return {"defense": {"name": name, "labels": labels, "certified": certified},
            "tasks": [{"transformation": "blur", "budgets": [0.0, 1.0]}], "results": results,
            "flags": {"invalid": False}, "protocol": {"n0": 32, "n": 500, "alpha": 0.001, "n_examples": n, "seed": 0}}


def _pair(tmp_path, only_a: int, only_b: int, both: int = 10):
    """Two certified columns on the same 25 examples: ``both`` certified by each, then ``only_a`` by a only,
    then ``only_b`` by b only."""
    fa = [i < both + only_a for i in range(N)]
    fb = [i < both or both + only_a <= i < both + only_a + only_b for i in range(N)]
    a = _entry("a", [("blur", "a", 1.0, sum(fa) / N, 0.92, {})])
    b = _entry("b", [("blur", "b", 1.0, sum(fb) / N, 0.92, {})])
    a = attach_rows(a, tmp_path, {("blur", "a", 1.0, "certified_accuracy"): fa})
    b = attach_rows(b, tmp_path, {("blur", "b", 1.0, "certified_accuracy"): fb})
    return [a, b]


def _row(table):
    return table.rows[-1][2:]


def test_clopper_pearson_bounds_for_21_of_25():
    lo, hi = clopper_pearson(21, 25)
    assert lo == pytest.approx(0.63918, abs=1e-5) and hi == pytest.approx(0.95462, abs=1e-5)


def test_every_format_shows_the_exact_interval(tmp_path):
    entries = _pair(tmp_path, only_a=11, only_b=0)  # a: 21 of 25, b: 10 of 25
    lo, hi = clopper_pearson(21, 25)
    assert _row(certified_table(entries))[0].ci == (lo, hi)
    text = "84.0 [63.9, 95.5]"  # bounds rounded outward to 0.1 %
    assert f"**{text}**" in render(entries, "md", ["certified"], "t")
    assert f"\\textbf{{{text}}}" in render(entries, "latex", ["certified"], "t")
    html_cell = '<b><span class="n"><span class="v">84.0</span> <span class="ci">[63.9, 95.5]</span></span></b>'
    assert html_cell in render(entries, "html", ["certified"], "t")  # number and interval wrap apart
    lines = render(entries, "csv", ["certified"], "t").splitlines()
    assert lines[1] == "transformation,budget,a,a ci_low,a ci_high,a n,a rank,b,b ci_low,b ci_high,b n,b rank"
    cols = lines[2].split(",")
    assert cols[2:7] == ["0.84", f"{lo:.6g}", f"{hi:.6g}", "25", "best"]
    assert cols[7:] == ["0.4", *(f"{x:.6g}" for x in clopper_pearson(10, 25)), "25", ""]
    attacked = render(entries, "md", ["attacked"], "t")
    assert "84.0 [63.9, 95.5] / 92.0 [" in attacked  # both numbers carry their interval


def test_mcnemar_separates_eight_discordant_pairs(tmp_path):
    row = _row(certified_table(_pair(tmp_path, only_a=8, only_b=0)))  # p = 2 / 2^8 = 0.0078
    assert [c.bold for c in row] == [True, False] and [c.tied for c in row] == [False, False]
    assert [c.rank for c in row] == ["best", ""]


def test_three_discordant_pairs_are_a_tie(tmp_path):
    entries = _pair(tmp_path, only_a=3, only_b=0)  # p = 0.25: 52 % vs 40 % is not separated
    row = _row(certified_table(entries))
    assert [c.bold for c in row] == [False, False] and [c.tied for c in row] == [True, True]
    assert "*52.0 [31.3, 72.3]*" in render(entries, "md", ["certified"], "t")
    assert "\\textit{52.0 [31.3, 72.3]}" in render(entries, "latex", ["certified"], "t")
    assert '<i><span class="n"><span class="v">40.0</span> <span class="ci">[21.1, 61.4]</span></span></i>' in render(entries, "html", ["certified"], "t")
    assert render(entries, "csv", ["certified"], "t").splitlines()[2].endswith(",tied")


def test_the_legend_states_the_rule_and_the_interval():
    caption = certified_table([_entry("a", [("blur", "a", 1.0, 0.4, 0.92, {})])]).caption
    assert "95 % two-sided Clopper-Pearson interval" in caption
    assert "McNemar" in caption and "5 %" in caption and "tied" in caption and "Bold" in caption


def test_missing_rows_mark_nothing_and_say_so(tmp_path):
    a, b = _pair(tmp_path, only_a=11, only_b=0)
    (tmp_path / "b.rows.jsonl.xz").unlink()
    t = certified_table([a, b])
    assert [c.bold for c in _row(t)] == [False, False]  # a cannot be called best without testing b
    assert [c.tied for c in _row(t)] == [True, False]  # b is never marked
    assert "rows file missing" in t.caption and ": b." in t.caption


def test_other_example_ids_are_not_tested(tmp_path):
    a = attach_rows(_entry("a", [("blur", "a", 1.0, 0.8, 0.92, {})]), tmp_path)
    b = attach_rows(_entry("b", [("blur", "b", 1.0, 0.2, 0.92, {})]), tmp_path, examples=list(range(100, 125)))
    t = certified_table([a, b])
    assert [c.bold for c in _row(t)] == [False, False] and [c.tied for c in _row(t)] == [True, False]
    assert "other example ids" in t.caption and "a vs b" in t.caption


def _nested(tmp_path, big_flags, small_flags, small_ids):
    """``big`` on examples 0..24, ``small`` (the same protocol) on ``small_ids``, a subset of them."""
    big = attach_rows(_entry("big", [("blur", "big", 1.0, sum(big_flags) / N, 0.92, {})]), tmp_path,
                      {("blur", "big", 1.0, "certified_accuracy"): big_flags})
    n = len(small_ids)
    small = _entry("small", [("blur", "small", 1.0, sum(small_flags) / n, 0.92, {})], n=n)
    small = attach_rows(small, tmp_path, {("blur", "small", 1.0, "certified_accuracy"): small_flags}, examples=small_ids)
    return [big, small]


def test_nested_example_sets_are_tested_on_the_examples_they_share(tmp_path):
    ids = list(range(0, 25, 2))  # 13 of big's 25 examples
    big = [True] * N  # 100 % on 25; on the shared 13: 13 vs 4, 9 discordant pairs, p = 2 / 2^9
    small = [i < 4 for i in range(len(ids))]
    t = certified_table(_nested(tmp_path, big, small, ids))
    assert [c.bold for c in _row(t)] == [True, False]  # separated on the shared examples: no longer "untested"
    assert "Tested on the 13 examples they share" in t.caption and "big vs small" in t.caption
    assert "¶" not in "".join(t.headers)  # a different number of examples is not another protocol


def test_on_shared_examples_a_few_discordant_pairs_are_a_tie(tmp_path):
    ids = list(range(0, 25, 5))  # 5 shared examples can never separate (p >= 2 / 2^5 = 0.0625)
    t = certified_table(_nested(tmp_path, [True] * N, [False] * 5, ids))
    assert [c.bold for c in _row(t)] == [False, False] and [c.tied for c in _row(t)] == [True, True]


def test_the_highest_is_not_separated_where_it_is_worse_on_the_shared_examples(tmp_path):
    """big shows the higher value on its 25, but on the 11 it shares with small it certifies none and small 6:
    the two-sided test separates them (p = 2 / 2^6), in small's favour, so big is not bold."""
    ids = list(range(11))
    big = [i >= 11 for i in range(N)]  # 14 of 25 = 56 %, none of the shared 0..10
    small = [i < 6 for i in range(11)]  # 6 of 11 = 54.5 %, all on shared ones big misses
    row = _row(certified_table(_nested(tmp_path, big, small, ids)))
    assert row[0].value > row[1].value
    assert [c.bold for c in row] == [False, False] and [c.tied for c in row] == [True, True]


def test_an_accuracy_that_is_no_whole_number_of_examples_is_an_error():
    with pytest.raises(BenchError, match="not a whole number"):
        certified_table([_entry("a", [("blur", "a", 1.0, 0.5, 0.92, {})])])  # 12.5 of 25


def test_corruption_means_pool_counts_over_severities(tmp_path):
    cells = [("fog", "augmix", s, None, None, {"corruption_accuracy": acc}) for s, acc in [(1, 0.8), (2, 0.6)]]
    a = attach_rows(_entry("augmix", cells, n=10, certified=False), tmp_path)
    t = corruptions_table([a])
    fog = t.rows[0][1]
    assert fog.value == pytest.approx(0.7) and fog.n == 20 and fog.ci == clopper_pearson(14, 20)
    assert "pooled counts" in t.caption and "(corruption, severity, example)" in t.caption
    lines = render([a], "csv", ["corruptions"], "t").splitlines()
    assert lines[1] == "corruption,augmix,augmix ci_low,augmix ci_high,augmix n,augmix rank"


def test_cell_flags_follow_the_committed_rows():
    entries = load_entries(default_root(), "semantic", "digits")  # rows_file made absolute
    tss = next(e for e in entries if e["defense"]["name"] == "tss")
    assert Path(tss["provenance"]["rows_file"]).is_absolute()
    rows = read_rows(tss["provenance"]["rows_file"])
    for r in tss["results"]:
        if r["certified_accuracy"] is None:
            continue
        ids, flags = cell_flags(tss["tasks"], rows, r["label"], r["transformation"], r["budget"], "certified_accuracy")
        assert list(ids) == sorted(ids) and len(flags) == r["n_examples"]
        assert sum(flags) == round(r["certified_accuracy"] * r["n_examples"])
        _, emp = cell_flags(tss["tasks"], rows, r["label"], r["transformation"], r["budget"], "empirical_accuracy")
        assert sum(emp) == round(r["empirical_accuracy"] * r["n_examples"])

