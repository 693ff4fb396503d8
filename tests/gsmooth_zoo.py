"""The default suite's GSmooth defense for one transformation, prepared from the packaged zoo (no training)."""
from baselines.gsmooth.defense import GSmooth
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.models.store import ModelStore
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation

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
    d = GSmooth(**task.defense_config)
    d.prepare(ctx)
    return d, t, task.budgets
