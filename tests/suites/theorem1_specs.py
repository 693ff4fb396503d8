"""The model each of TSS and GSmooth asks the store for on a suite's Theorem 1 row (no checkpoint is loaded).

GSmooth's Theorem 1 rows must ask for exactly TSS's model (key and config hash) at equal settings, so one
checkpoint serves both columns; the suite tests compare the two specs this returns.
"""
from __future__ import annotations

from benchmark.models.store import ModelSpec
from benchmark.suites import load_suite


def theorem1_specs(suite_name: str, transformation: str, dataset: str) -> tuple[ModelSpec, ModelSpec]:
    """(TSS's spec, GSmooth's spec) of ``transformation`` in ``suite_name`` on ``dataset``, under its smoke
    profile."""
    from baselines.gsmooth.defense import GSmooth
    from baselines.tss import TSS
    from benchmark.certify.smoothing import SmoothingParams
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.models.store import LoadedModel, ModelStore
    from benchmark.transformations import get_transformation

    class Specs(ModelStore):
        def _resolve(self, spec: ModelSpec) -> LoadedModel:
            self.specs = [*getattr(self, "specs", []), spec]
            return LoadedModel(spec.build(), spec.key, spec.config_hash, "-", "test")

    suite = load_suite(suite_name)
    cfgs = {t.defense: t.defense_config for t in suite.tasks(suite.profile("smoke"), 0)
            if t.transformation == transformation and t.dataset == dataset}
    specs = []
    for defense in (TSS(**cfgs["tss"]), GSmooth(**cfgs["gsmooth"])):
        store = Specs(allow_train=False)
        defense.prepare(Context(dataset=get_dataset(dataset), transformation=get_transformation(transformation),
                                smoothing=SmoothingParams(n0=8, n=16, alpha=0.001, batch_size=16), store=store,
                                seed=0, budgets=suite.budgets(transformation, dataset)))
        specs.append(store.specs[-1])
    return specs[0], specs[1]
