"""GSmooth's base classifier takes TSS's base-model keys (baselines/common/base_model.py, issue #44 part 3): TSS's
network, input normalisation, recipe and consistency regularisation over GSmooth's own semantic noise, recorded in
the model config only when set, so today's checkpoints keep their hashes."""
from __future__ import annotations

from baselines.common.base_model import BASE_MODEL_DEFAULTS, base_model_options
from baselines.gsmooth.defense import GSmooth
from baselines.tss import TSS
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.models.store import LoadedModel, ModelSpec, ModelStore
from benchmark.transformations import get_transformation

OFFICIAL = {"arch": "conv4fc3", "training": "tss-adam", "consistency_lambda": 20.0, "noise_draws": 1,
            "normalize": [0.5, 0.5]}
GSMOOTH = {"sigma1": 5.0, "sigma2": 0.25, "encoder": "lowpass", "content_blur": 1.5, "steps_resolve": 0,
           "steps_recon": 1}


class _Specs(ModelStore):
    """Records the specs a defense asks for and hands back untrained models (nothing is trained)."""

    def _resolve(self, spec: ModelSpec) -> LoadedModel:
        self.specs = [*getattr(self, "specs", []), spec]
        return LoadedModel(spec.build(), spec.key, spec.config_hash, "-", "test")


def _specs(**cfg) -> list[ModelSpec]:
    store = _Specs(allow_train=False)
    ctx = Context(dataset=get_dataset("digits"), transformation=get_transformation("rotational_blur"),
                  smoothing=SmoothingParams(n0=8, n=16, alpha=0.001, batch_size=16), store=store, seed=0,
                  budgets=[5.0], profile={"surrogate_quality": False})
    GSmooth(**GSMOOTH, **cfg).prepare(ctx)
    return store.specs


def test_options_are_the_set_keys_typed():
    assert base_model_options(dict(BASE_MODEL_DEFAULTS)) == {}
    assert base_model_options({**BASE_MODEL_DEFAULTS, **OFFICIAL, "noise_draws": "2"}) == {
        "arch": "conv4fc3", "training": "tss-adam", "consistency_lambda": 20.0, "noise_draws": 2,
        "normalize": (0.5, 0.5)}
    assert set(BASE_MODEL_DEFAULTS) <= set(TSS.defaults) and set(BASE_MODEL_DEFAULTS) <= set(GSmooth.defaults)


def test_gsmooth_base_classifier_takes_tss_network_and_consistency_on_its_own_noise():
    (sur_plain, plain), (sur_official, official) = _specs(), _specs(**OFFICIAL)
    assert sur_plain.config_hash == sur_official.config_hash  # the surrogate is not the base classifier
    assert plain.config["arch"] == "small_cnn" and "normalize" not in plain.config
    assert not {"optimizer", "consistency_lambda", "noise_draws"} & set(plain.config["train"])
    assert official.config["arch"] == "conv4fc3" and official.config["storage"] == "float16"
    assert official.config["normalize"] == {"mean": [0.5], "std": [0.5]}
    train = official.config["train"]
    # tss-adam (Adam + cosine: the record leaves those defaults out), batch 400 counting the one noisy copy
    assert (train["lr"], train["epochs"], train["batch_size"]) == (1e-3, 20, 400) and "optimizer" not in train
    assert (train["consistency_lambda"], train["noise_draws"]) == (20.0, 1)
    assert official.config["augmentation"] == plain.config["augmentation"]  # GSmooth's own semantic noise
    assert official.config["augmentation"]["name"] == "gsmooth-semantic-noise"
    assert official.config_hash != plain.config_hash and official.key == plain.key == "digits/gsmooth/rotational_blur"
