"""``bench plot`` and the page's charts: one colour per defense in every figure, axes in the transformation's
units, a 95 % Clopper–Pearson band per curve, and the legend off the data."""
from pathlib import Path

import matplotlib
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex

from benchmark.leaderboard.entry import entry_rows, load_entries_from
from benchmark.leaderboard.plot import EXTRA, FIXED, axis_label, colour, draw, linestyle, load_rows, panels
from benchmark.transformations import get_transformation, transformation_names

from tests.repo import REPO

matplotlib.use("Agg")
FOLDER = REPO / "leaderboards" / "semantic" / "digits"


@pytest.fixture(scope="module")
def data():
    entries = load_entries_from([REPO / "leaderboards"], "semantic", "digits")
    return entries, load_rows(entries, FOLDER)


def _line_colours(fig) -> dict[str, set[str]]:
    """Legend label -> colours of the data lines drawn with that colour (via the figure legend)."""
    legend = fig.legends[0]
    return {t.get_text(): to_hex(h.get_color()) for t, h in zip(legend.get_texts(), legend.legend_handles)
            if h.get_linestyle() != "None" and hasattr(h, "get_color")}


def test_colours_are_fixed_per_label_and_variants_share_them_dashed():
    assert colour("tss") == FIXED["tss"] and colour("gsmooth:paper") == colour("gsmooth") == FIXED["gsmooth"]
    assert colour("spt:indiv") == colour("spt:dist") == FIXED["spt"]
    assert linestyle("gsmooth") == "-" and linestyle("gsmooth:paper") == "--" and linestyle("spt:dist") != "-"
    assert len(set(FIXED.values())) == len(FIXED)
    for label in ("my_defense", "other", "x:paper", "brightness_smoothing"):
        assert colour(label) in EXTRA and colour(label) not in FIXED.values()
        assert colour(label) == colour(label)  # a hash of the label, not of the process
    assert colour("x:paper") == colour("x")


def test_same_label_same_colour_in_two_plots_with_different_defenses(data):
    import matplotlib.pyplot as plt

    entries, rows = data
    some = [e for e in entries if e["defense"]["name"] in ("gsmooth", "tss")]
    others = [e for e in entries if e["defense"]["name"] in ("tss", "deepg", "semanify", "interval")]
    figs = [draw(panels(es, rows, ["rotation", "translation"])) for es in (some, others)]
    a, b = (_line_colours(f) for f in figs)
    assert a["tss"] == b["tss"] == FIXED["tss"] and a["gsmooth"] == FIXED["gsmooth"] and b["deepg"] == FIXED["deepg"]
    for fig in figs:  # and every line of a label in every panel has the legend's colour
        for ax in fig.axes:
            for line in ax.get_lines():
                assert to_hex(line.get_color()) in set(FIXED.values())
        plt.close(fig)


@pytest.mark.parametrize("name", transformation_names())
def test_axis_label_names_the_transformations_units(name):
    units = get_transformation(name).units
    assert units and units in axis_label(name)


def test_each_curve_has_a_band_and_the_legend_is_off_the_data(data):
    import matplotlib.pyplot as plt

    entries, rows = data
    found = panels(entries, rows, None)
    fig = draw(found)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax, (tname, curves) in zip(fig.axes, found):
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == len(curves), tname  # one Clopper–Pearson band per label
        assert axis_label(tname) == ax.get_xlabel()
        assert ax.get_legend() is None  # no per-panel legend on the data
    assert len(fig.legends) == 1  # one shared legend for the figure
    box = fig.legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        if ax.axison:
            assert not box.overlaps(ax.get_window_extent(renderer)), "the legend covers a panel"
    plt.close(fig)


def test_band_is_the_clopper_pearson_interval(data):
    from benchmark.reports.intervals import clopper_pearson

    entries, rows = data
    (_, curves), = panels([e for e in entries if e["defense"]["name"] == "tss"], rows, ["rotation"])
    c = curves["tss"]
    lo, hi = c.band()
    assert c.n == 25 and (lo[0], hi[0]) == clopper_pearson(int(c.k[0]), 25)
    assert ((lo <= c.accuracy) & (c.accuracy <= hi)).all()


def test_bench_plot_writes_a_png(tmp_path):
    from benchmark.cli import main

    out = tmp_path / "cert.png"
    assert main(["plot", "--leaderboards", str(REPO / "leaderboards"), "--transformation", "rotation",
                 "--out", str(out)]) == 0
    assert Path(out).read_bytes()[:4] == b"\x89PNG"


def test_load_rows_reuses_the_rows_the_tables_decoded_and_reads_the_rest(data, tmp_path):
    """Rows of entries named by absolute path with their sha256 come from ``entry_rows``' cache (the page decodes
    each rows file once for tables and charts); an entry whose rows file is relative is read from the folder."""
    entries, rows = data
    first = next(e for e in entries if e["defense"]["certified"])
    assert Path(first["provenance"]["rows_file"]).is_absolute()
    assert load_rows([first], tmp_path)[first["defense"]["name"]] is entry_rows(first)
    relative = {**first, "provenance": {**first["provenance"], "rows_file": Path(first["provenance"]["rows_file"]).name}}
    again = load_rows([relative], FOLDER)[first["defense"]["name"]]
    assert again is not entry_rows(first) and again == rows[first["defense"]["name"]]
