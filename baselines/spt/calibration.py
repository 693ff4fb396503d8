"""DistSPT's distributional interpolation-error calibration, stored like a trained model (zoo / cache).

M pairs ``(x_j, beta_j)``: x_j distinct images of the *training* split (a uniformly random subset of an iid
sample is iid from the data distribution D; the error does not involve the classifier, so its training on
them does not matter), ``beta_j ~ N(0, sigma_gamma^2 I)``. For each pair the proven sup of the interpolation
error over the attack region (baselines/spt/interpolation.py) is stored. With ``k`` pairs whose sup is not
proven <= E, the one-sided Clopper-Pearson bound ``rho_D = CP_upper(k, M, alpha_E)`` bounds
``E_x[rho_x]`` (``rho_x = P_beta(sup ||eps|| > E)``) with probability >= 1 - alpha_E over the calibration
sample; by Markov's inequality ``rho_x <= rho_D / kappa`` for all inputs but a kappa fraction of D.
Stored as a module with one buffer so the packaged zoo can ship it (``bench train`` computes it).
"""
from __future__ import annotations

import torch
from torch import nn

from baselines.spt.interpolation import sup_errors
from benchmark.api import Context, ModelSpec, Transformation


class Calibration(nn.Module):
    """The per-pair proven sups ``[M]`` (float64) of a DistSPT calibration."""

    def __init__(self, pairs: int):
        super().__init__()
        self.register_buffer("sups", torch.full((pairs,), float("inf"), dtype=torch.float64))


def calibration_spec(ctx: Context, t: Transformation, mask: torch.Tensor, settings: dict) -> ModelSpec:
    """The ModelSpec of the calibration; ``settings``: sigma_gamma, error, budget, pairs, cells, seed."""
    spec = ctx.dataset.spec
    config = {"kind": "spt-calibration", "version": 1, "dataset": {"name": spec.name, "version": spec.version},
              "transformation": t.name, **settings}
    pairs = int(settings["pairs"])

    def train(module: Calibration) -> Calibration:
        x, _ = ctx.train_data()
        gen = torch.Generator().manual_seed(int(settings["seed"]))
        idx = torch.randperm(len(x), generator=gen)[:pairs]
        betas = torch.randn(len(idx), t.dim, generator=gen) * float(settings["sigma_gamma"])
        sups = [sup_errors(t, x[i:i + 1], mask, betas[j:j + 1], float(settings["budget"]), int(settings["cells"]),
                           float(settings["error"]))[0] for j, i in enumerate(idx.tolist())]
        module.sups = torch.cat(sups) if sups else module.sups
        if len(module.sups) < pairs:  # a training split smaller than M: unused slots stay +inf (failures)
            module.sups = torch.cat([module.sups, torch.full((pairs - len(module.sups),), float("inf"),
                                                             dtype=torch.float64)])
        return module

    return ModelSpec(key=f"{spec.name}/spt/{t.name}/calibration", config=config,
                     build=lambda: Calibration(pairs), train=train)
