"""TSS's base model as suite config (baselines/tss/defense.py): architecture, TSS's training recipe, consistency
regularisation and the sliced training range are recorded in the model config only when set, so existing
checkpoints keep their hashes."""
from __future__ import annotations

import pytest

from baselines.tss import TSS
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.models.store import LoadedModel, ModelSpec, ModelStore
from benchmark.recipes import TRAINING_RECIPES, train_config
from benchmark.transformations import get_transformation

OFFICIAL = {"arch": "conv4fc3", "training": "tss", "consistency_lambda": 20.0, "noise_draws": 2, "normalize": [0.5, 0.5]}


class _Specs(ModelStore):
    """Records the specs a defense asks for and hands back untrained models (nothing is trained)."""

    def _resolve(self, spec: ModelSpec) -> LoadedModel:
        self.specs = [*getattr(self, "specs", []), spec]
        return LoadedModel(spec.build(), spec.key, spec.config_hash, "-", "test")


def _spec(name: str, budgets: tuple[float, ...], **cfg) -> ModelSpec:
    store = _Specs(allow_train=False)
    ctx = Context(dataset=get_dataset("digits"), transformation=get_transformation(name),
                  smoothing=SmoothingParams(n0=8, n=16, alpha=0.001, batch_size=16), store=store, seed=0,
                  budgets=list(budgets))
    TSS(**cfg).prepare(ctx)
    return store.specs[-1]


@pytest.mark.parametrize("name,budgets,cfg", [("translation", (2.0,), {"scale": 3.0}),
                                              ("rotation", (10.0,), {"scale": 0.4}),
                                              ("contrast_brightness", (0.1,), {"scale": 0.2})])
def test_official_options_change_only_the_base_model_record(name, budgets, cfg):
    plain = _spec(name, budgets, **cfg)
    official = _spec(name, budgets, **cfg, **OFFICIAL)
    assert plain.config["arch"] == "small_cnn" and "normalize" not in plain.config
    assert not {"optimizer", "consistency_lambda", "noise_draws"} & set(plain.config["train"])
    assert official.config["arch"] == "conv4fc3" and official.config["normalize"] == {"mean": [0.5], "std": [0.5]}
    norm = official.build()[0]  # the first layer: TSS's (0.5, 0.5), not the dataset's
    assert norm.mean.flatten().tolist() == [0.5] and norm.std.flatten().tolist() == [0.5]
    train = official.config["train"]
    assert (train["optimizer"], train["momentum"], train["lr"], train["weight_decay"], train["epochs"]) == \
        ("sgd", 0.9, 0.1, 1e-4, 20)
    assert (train["lr_schedule"], train["lr_step"], train["lr_gamma"]) == ("step", 30, 0.1)
    assert train["batch_size"] == 200  # TSS's batch 400 counts the 2 noisy copies of each image
    assert (train["consistency_lambda"], train["noise_draws"]) == (20.0, 2)
    assert official.config["augmentation"] == plain.config["augmentation"]  # same smoothing distribution
    assert official.config_hash != plain.config_hash


def test_sliced_training_range_is_config():
    assert _spec("rotation", (10.0, 50.0), scale=0.12).config["augmentation"]["train_range"] == 50.0  # largest budget
    assert _spec("rotation", (50.0,), scale=0.12, train_range=55.0).config["augmentation"]["train_range"] == 55.0
    with pytest.raises(BenchError, match="train_range"):
        _spec("translation", (2.0,), scale=3.0, train_range=5.0)


def test_training_recipe_tss_and_unknown_names():
    assert TRAINING_RECIPES["tss"]["batch_size"] == 400
    assert train_config("mnist", "tss").batch_size == 400 and train_config("mnist", "tss", 4).batch_size == 100
    assert train_config("mnist") == train_config("mnist", None)
    with pytest.raises(BenchError, match="unknown training recipe"):
        train_config("mnist", "cohen")
    with pytest.raises(BenchError, match="divisible"):
        train_config("mnist", "tss", 3)


def test_tss_adam_recipe_changes_only_the_optimiser():
    """tss-adam keeps TSS's epochs, batch and seed; only the optimiser and its schedule differ (recipes.py)."""
    tss, adam = train_config("mnist", "tss"), train_config("mnist", "tss-adam")
    assert (adam.epochs, adam.batch_size, adam.seed) == (tss.epochs, tss.batch_size, tss.seed) == (20, 400, 0)
    assert (adam.optimizer, adam.lr, adam.lr_schedule, adam.momentum) == ("adam", 1e-3, "cosine", 0.0)
    assert train_config("mnist", "tss-adam", noise_draws=2).batch_size == 200
