"""The corruptions-mnist suite: on mnist-c (the official test set) its mapping names only table1-mnist-official's
tasks, and a smoke run on real digits gives leaderboard cells with 95 % Clopper-Pearson intervals. Real-file tests
skip when ../shared/data/mnist is absent."""
import pytest

from benchmark.defenses import get_defense_class
from benchmark.reports.corruption import is_proxy
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation
from tests.repo import SHARED_DATA

SHARED = SHARED_DATA / "mnist"
CORRUPTIONS = ["defocus_blur", "gaussian_noise", "brightness"]


@pytest.fixture(scope="module")
def suite():
    return load_suite("corruptions-mnist")


def test_on_mnist_c_with_the_official_table1_models(suite):
    assert suite.models_from.name == "table1-mnist-official" and suite.datasets == ["mnist-c"]
    assert suite.defenses == ["vanilla", "tss", "gsmooth", "augmix"]
    assert {"smoke", "default", "leaderboard"} <= set(suite.profiles)
    assert "Mu & Gilmer" in suite.description


def test_every_prepared_task_is_an_official_table1_task(suite):
    """A defense is prepared for a mapped transformation only where table1-mnist-official runs it (its zoo models);
    where it does not (tss: defocus/zoom blur, pixelate) the defense does not support it and shows "--"."""
    table1 = suite.models_from.transformations
    prepared, dashes = set(), set()
    for task in suite.tasks(suite.profile("smoke"), 0):
        assert task.transformation in table1, task
        defense = get_defense_class(task.defense)(**task.defense_config)
        if defense.supports(get_transformation(task.transformation)):
            assert task.defense in table1[task.transformation]["run"], task
            prepared.add((task.defense, task.transformation))
        else:
            dashes.add((task.defense, task.transformation))
    assert dashes == {("tss", "defocus_blur"), ("tss", "zoom_blur"), ("tss", "pixelate")}
    assert ("gsmooth", "zoom_blur") in prepared and ("tss", "contrast_brightness") in prepared
    # gsmooth's Gaussian blur and brightness/contrast are its Theorem 1 tasks (TSS's checkpoints), as in Table 1
    configs = {(t.defense, t.transformation): t.defense_config for t in suite.tasks(suite.profile("smoke"), 0)}
    assert configs[("gsmooth", "gaussian_blur")]["theorem1"] and configs[("gsmooth", "contrast_brightness")]["theorem1"]
    assert "theorem1" not in configs[("gsmooth", "pixelate")]


def test_matched_and_proxy_corruptions(suite):
    tasks = {t.corruption: t for t in suite.tasks(suite.profile("smoke"), 0, defenses=["vanilla"])}
    matched = sorted(c for c, t in tasks.items() if not is_proxy(t))
    assert matched == ["brightness", "contrast", "defocus_blur", "gaussian_blur", "pixelate", "zoom_blur"]
    assert tasks["motion_blur"].transformation == "gaussian_blur" and is_proxy(tasks["motion_blur"])


@pytest.mark.skipif(not all((SHARED / f).is_file() or (SHARED / f"{f}.gz").is_file()  # plain or .gz
                            for f in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                      "t10k-labels-idx1-ubyte")),
                    reason=f"the four official MNIST files not found in {SHARED}")
def test_smoke_run_gives_cells_with_clopper_pearson_intervals(suite, tmp_path, monkeypatch):
    from benchmark.datasets import get_dataset
    from benchmark.datasets.corruption_builder import build_corrupted_split
    from benchmark.datasets.mnist_idx import mnist
    from benchmark.leaderboard.entry import build_entry
    from benchmark.leaderboard.formats import render
    from benchmark.leaderboard.render import corruptions_table
    from benchmark.reports.intervals import clopper_pearson
    from benchmark.run.driver import run_suite
    from benchmark.run.options import RunOptions
    from benchmark.run.results import load_run

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    ds = get_dataset("mnist-c")
    ds.cache_root().parent.mkdir(parents=True)  # only the corruptions this test runs (the full build: ~15 min)
    build_corrupted_split(*mnist.load("test", SHARED), ds.cache_root(), 0, corruptions=tuple(CORRUPTIONS),
                          log=lambda m: None)
    opts = RunOptions(profile="smoke", defenses=["vanilla", "tss", "gsmooth"], transformations=CORRUPTIONS,
                      data_root=SHARED, allow_train=False, out=tmp_path / "run", log=lambda m: None)
    run = load_run(run_suite(suite, opts))
    table = (tmp_path / "run" / "table.md").read_text()
    assert "defocus_blur" in table and "gaussian_noise #" in table and "NOT Mu & Gilmer" in table
    entries = [build_entry(run, d, "mnist-c", checker={}, warnings=[], randomized_without_certificate=False,
                           data_root=SHARED)[0] for d in ("vanilla", "tss", "gsmooth")]
    t = corruptions_table(entries)
    assert [r[0].text for r in t.rows] == [*CORRUPTIONS, "mean"]
    assert "NOT Mu & Gilmer" in t.caption and "Clopper-Pearson" in t.caption
    *rows, mean = t.rows
    n_cells = 0
    for j in range(1, len(t.headers)):
        cells = [row[j] for row in rows if row[j].value is not None]  # tss has no defocus blur models: "--"
        for cell in [*cells, mean[j]]:
            k = round(cell.value * cell.n)
            assert cell.ci == clopper_pearson(k, cell.n) and cell.ci[0] <= cell.value <= cell.ci[1]
        assert all(c.n == 2 * 5 for c in cells) and mean[j].n == 2 * 5 * len(cells)  # (example, severity) cells
        n_cells += len(cells) + 1
    assert n_cells == 3 * 4 - 1
    md = render(entries, "md", ["corruptions"], "corruptions-mnist suite on mnist-c")
    assert md.count(" [") >= n_cells
