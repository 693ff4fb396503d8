"""Leaderboard tables from hand-made entries: separated best in bold, '--', dagger labels, invalid entries and
other protocols never marked (the McNemar rule itself: test_intervals_render.py)."""
from tests.entry_rows import attach_rows

from benchmark.leaderboard.formats import render
from benchmark.leaderboard.render import attacked_table, certified_table, corruptions_table


def _entry(name, labels, cells, certified=True, invalid=False, tasks=None):
    results = [{"transformation": t, "label": lab, "budget": b, "clean_accuracy": 0.9, "certified_accuracy": c,
                "empirical_accuracy": e, "abstain_rate": 0.0, "n_examples": 10, **extra}
               for (t, lab, b, c, e, extra) in cells]
    return {"defense": {"name": name, "labels": labels, "certified": certified},
            "tasks": tasks or [{"transformation": "blur", "budgets": [0.0, 1.0]}],
            "results": results, "flags": {"invalid": invalid},
            "protocol": {"n0": 32, "n": 500, "alpha": 0.001, "n_examples": 10, "seed": 0}}


def _cells(table):
    return {(row[0].text, row[1].text): row[2:] for row in table.rows}


def _values(row):
    return [x.plain().split(" [")[0] + (" §" if x.plain().endswith(" §") else "") for x in row]


def test_certified_table_bolds_the_separated_best_sound_value_only(tmp_path):
    a = _entry("gsmooth", ["gsmooth", "gsmooth:paper"], [("blur", "gsmooth", 1.0, 0.1, 0.6, {}),
                                                         ("blur", "gsmooth:paper", 1.0, 0.9, 0.6, {})])
    b = _entry("tss", ["tss"], [("blur", "tss", 1.0, 0.7, 0.8, {})])
    c = _entry("liar", ["liar"], [("blur", "liar", 1.0, 1.0, 0.1, {})], invalid=True)
    v = _entry("vanilla", ["vanilla"], [("blur", "vanilla", 1.0, None, 0.2, {})], certified=False)
    entries = [attach_rows(e, tmp_path) for e in (v, c, b, a)]
    t = certified_table(entries)
    assert t.headers[2:] == ["gsmooth", "gsmooth:paper †", "liar (invalid)", "tss"]  # certified defenses only
    row = _cells(t)[("blur", "1")]
    assert _values(row) == ["10.0", "90.0", "100.0", "70.0"]
    assert [x.bold for x in row] == [False, False, False, True]  # 6 discordant examples, all tss's: p = 0.03
    assert not any(x.tied for x in row)
    assert "**70.0 [34.7, 93.4]**" in render(entries, "md", ["certified"], "t")
    assert "\\textbf{70.0 [34.7, 93.4]}" in render(entries, "latex", ["certified"], "t")
    assert ('<b><span class="n"><span class="v">70.0</span> <span class="ci">[34.7, 93.4]</span></span></b>'
            in render(entries, "html", ["certified"], "t"))


def test_unverified_deterministic_cells_are_marked_and_never_ranked(tmp_path):
    b = attach_rows(_entry("tss", ["tss"], [("blur", "tss", 1.0, 0.7, 0.8, {})]), tmp_path)
    claims = _entry("claims", ["claims"], [("blur", "claims", 1.0, 0.9, 1.0, {})])  # no rows: never tested
    claims["flags"]["unverified"] = ["blur/claims"]
    row = _cells(certified_table([b, claims]))[("blur", "1")]
    assert _values(row) == ["90.0 §", "70.0"]
    assert [x.bold for x in row] == [False, True]  # the higher unverified value is not ranked
    assert "§" in certified_table([b, claims]).caption
    assert _values(_cells(attacked_table([b, claims]))[("blur", "1")]) == ["90.0 §", "70.0"]
    assert [x.plain().count(" / ") for x in _cells(attacked_table([b, claims]))[("blur", "1")]] == [1, 1]


def test_attacked_table_pairs_certified_and_empirical_and_csv_keeps_numbers():
    b = _entry("tss", ["tss"], [("blur", "tss", 1.0, 0.7, 0.8, {})])
    v = _entry("vanilla", ["vanilla"], [("blur", "vanilla", 1.0, None, 0.2, {})], certified=False)
    row = _cells(attacked_table([b, v]))[("blur", "1")]
    assert [x.plain() for x in row] == ["70.0 [34.7, 93.4] / 80.0 [44.3, 97.5]", "-- / 20.0 [2.5, 55.7]"]
    csv = render([b, v], "csv", ["attacked"], "t").splitlines()
    assert csv[1] == ("transformation,budget,tss certified,tss certified ci_low,tss certified ci_high,tss attacked,"
                      "tss attacked ci_low,tss attacked ci_high,tss n,vanilla certified,vanilla certified ci_low,"
                      "vanilla certified ci_high,vanilla attacked,vanilla attacked ci_low,vanilla attacked ci_high,"
                      "vanilla n")
    assert csv[2].startswith("blur,1,0.7,0.347") and csv[2].endswith(",10,,,,0.2,0.0252107,0.556095,10")


def test_corruptions_table_means_over_severities_and_cells():
    cells = [("fog", "augmix", s, None, None, {"corruption_accuracy": acc}) for s, acc in [(1, 0.8), (2, 0.6)]]
    cells += [("snow", "augmix", 1, None, None, {"corruption_accuracy": 0.5}),
              ("snow", "augmix", 0, None, None, {"corruption_accuracy": 0.0})]  # budget 0: not a severity
    a = _entry("augmix", ["augmix"], cells, certified=False)
    t = corruptions_table([a])
    got = {row[0].text: row[1].value for row in t.rows}
    assert got["fog"] == 0.7 and got["snow"] == 0.5
    assert abs(got["mean"] - (0.8 + 0.6 + 0.5) / 3) < 1e-12


def test_entries_of_another_protocol_are_marked_and_never_ranked(tmp_path):
    a = attach_rows(_entry("tss", ["tss"], [("blur", "tss", 1.0, 0.7, 0.8, {})]), tmp_path)
    b = attach_rows(_entry("gsmooth", ["gsmooth"], [("blur", "gsmooth", 1.0, 0.6, 0.7, {})]), tmp_path)
    smoke = _entry("mine", ["mine"], [("blur", "mine", 1.0, 1.0, 1.0, {})])
    smoke["protocol"].update(profile="smoke", n_examples=2, n0=16, n=100)
    for r in smoke["results"]:
        r["n_examples"] = 2
    smoke = attach_rows(smoke, tmp_path)
    t = certified_table([a, b, smoke])
    assert t.headers[2:] == ["gsmooth", "mine ¶", "tss"]
    row = _cells(t)[("blur", "1")]
    assert [x.bold for x in row] == [False, False, False]  # 70 vs 60 on 10 examples: not separated
    assert [x.tied for x in row] == [True, False, True]  # 100% on 2 smoke examples is not ranked
    assert "¶" in t.caption and "(mine)" in t.caption and "10 examples" in t.caption
    assert [x.bold for x in _cells(attacked_table([a, b, smoke]))[("blur", "1")]] == [False, False, False]
    assert "\\P{}" in render([a, b, smoke], "latex", ["certified"], "t")


def test_a_fixed_n_entry_is_another_protocol_than_sequential_ones_and_the_caption_names_the_rules(tmp_path):
    """Same profile, n0, n and alpha, but `--certify fixed` against the profile's sequential rule: different
    statistics, so never ranked together; every caption says which Monte-Carlo rule the entries used."""
    def seq(entry, **rules):
        entry["protocol"]["profile_settings"] = rules
        return attach_rows(entry, tmp_path)

    a = seq(_entry("tss", ["tss"], [("blur", "tss", 1.0, 0.7, 0.8, {})]), certify="sequential")
    b = seq(_entry("gsmooth", ["gsmooth"], [("blur", "gsmooth", 1.0, 0.6, 0.7, {})]), certify="sequential")
    t = certified_table([a, b])
    assert "sequential (n the cap) CERTIFY and PREDICT" in t.caption and "¶" not in t.caption
    fixed = seq(_entry("mine", ["mine"], [("blur", "mine", 1.0, 1.0, 1.0, {})]), certify="fixed")
    t = certified_table([a, b, fixed])
    assert t.headers[2:] == ["gsmooth", "mine ¶", "tss"]
    assert [x.tied for x in _cells(t)[("blur", "1")]] == [True, False, True]  # 100 % under fixed n: not ranked
    assert "fixed-n CERTIFY and PREDICT" in t.caption and "(mine)" in t.caption
    paper = seq(_entry("vanilla", ["vanilla"], [("blur", "vanilla", 1.0, 0.5, 0.5, {})]), predict="sequential")
    assert "fixed-n CERTIFY, sequential PREDICT" in certified_table([paper]).caption


def test_all_zero_rows_have_nothing_in_bold():
    a = _entry("tss", ["tss"], [("blur", "tss", 1.0, 0.0, 0.1, {})])
    b = _entry("gsmooth", ["gsmooth"], [("blur", "gsmooth", 1.0, 0.0, 0.2, {})])
    assert [x.bold for x in _cells(certified_table([a, b]))[("blur", "1")]] == [False, False]
    cells = [("fog", "augmix", 1, None, None, {"corruption_accuracy": 0.0})]
    c = _entry("augmix", ["augmix"], cells, certified=False)
    d = _entry("vanilla", ["vanilla"], [("fog", "vanilla", 1, None, None, {"corruption_accuracy": 0.0})],
               certified=False)
    assert not any(cell.bold for row in corruptions_table([c, d]).rows for cell in row)
