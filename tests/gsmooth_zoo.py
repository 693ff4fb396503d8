"""The default suite's GSmooth defense for one transformation, prepared from the packaged zoo (no training).

These tests exercise the semantic-layer certificate, so the defense is prepared with it everywhere: whole-path
(``slices: 0``; the sliced tests set their own), and on the rows where the suite uses Theorem 1 with the
semantic-layer design the zoo's surrogates were trained for (``SEMANTIC_LAYER``).
"""
from baselines.gsmooth.defense import GSmooth
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.models.store import ModelStore
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation

#: the semantic-layer design of the rows the suite certifies by Theorem 1 (their surrogates are in the zoo)
SEMANTIC_LAYER = {
    "gaussian_blur": {"sigma1": 2.0, "sigma2": 0.25, "encoder": "pose", "steps_resolve": 0},
    "translation": {"sigma1": 2.0, "sigma2": 0.25, "encoder": "pose", "steps_resolve": 0},
    "brightness": {"sigma1": 0.3, "sigma2": 0.25, "encoder": "pose", "steps_resolve": 0},
    "contrast_brightness": {"sigma1": 0.25, "sigma2": 0.25, "encoder": "pose", "steps_resolve": 0},
}
WHOLE_PATH = {"theorem1": False, "slices": 0}

#: the default profile's Monte-Carlo protocol
DEFAULT_SMOOTHING = SmoothingParams(n0=32, n=500, alpha=0.001, batch_size=256, n_predict=200)


def prepared_gsmooth(name: str, device: str = "cpu"):
    """(defense, transformation, budgets) of the default profile's gsmooth task on ``name``, on ``device``."""
    suite = load_suite("semantic")
    t = get_transformation(name)
    task = [k for k in suite.tasks(suite.profile("default"), 0, transformations=[name], defenses=["gsmooth"])][0]
    ctx = Context(dataset=get_dataset("digits"), transformation=t, smoothing=DEFAULT_SMOOTHING,
                  store=ModelStore(allow_train=False), device=device, budgets=task.budgets,
                  profile={"surrogate_quality": False})
    config = {**task.defense_config, **WHOLE_PATH, **SEMANTIC_LAYER.get(name, {})}
    config.pop("smoothing", None)
    config.pop("scale_b", None)
    d = GSmooth(**config)
    d.prepare(ctx)
    return d, t, task.budgets
