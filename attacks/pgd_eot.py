"""PGD with Expectation over Transformation (EoT) in transformation-parameter space (paper Table 2).

The attack maximises the cross-entropy of the defense's *smoothed* prediction,

    loss(theta) = -log( mean_{e=1..E} softmax(noisy_logits(T(x, theta)))_y ),

where every ``noisy_logits`` call draws the defense's own noise once per image (the
``Defense.noisy_logits`` attack surface). The mean over E draws is the EoT estimate of the
smoothed class probabilities, and its gradient in ``theta`` averages over the noise.
Budgets x restarts x EoT draws go through the model as one batch. Each step moves ``theta`` by
``step_size * budget`` (sign of the gradient for l-infinity, the normalised gradient for l2)
and projects it back onto the budget region and the parameter domain (attacks/region.py).

The optimisation only proposes parameters: the final iterate of every restart and the best
iterate seen (setting ``candidates``) are applied with the REAL transformation and judged by the defense's own
``predict`` (an abstention counts as not robust). For integer threat models (translation)
the search runs over fractional shifts, which the transformation interpolates
differentiably, and the proposals are rounded to the nearest integer point of the region
(``info["rounded"]``). Where the transformation has no gradient in ``theta`` (pixelate) or the
defense has no attack surface (``noisy_logits`` returns None), the result says so
(``fallback``) and the gradient-free worst-of-k search runs instead.
"""
from __future__ import annotations

import math

import torch

from attacks.base import AttackResult, ParameterAttack
from attacks.region import is_integer, project, snap_integer, unique_rows
from attacks.worst_of_k import WorstOfK
from benchmark.api import BenchError, Transformation


class PGDEoT(ParameterAttack):
    """Projected gradient ascent on the smoothed cross-entropy over the transformation parameter.

    Settings:
        steps: gradient steps per restart.
        restarts: independent random starts (uniform in the region), optimised in one batch.
        eot: noise draws of the defense per restart and step (Expectation over Transformation).
        step_size: step length as a fraction of the budget.
        candidates: ``all`` (the final iterate of every restart plus the best iterate seen, by the EoT
            loss) or ``best`` (only the best iterate seen: one predict per budget, for cheap profiles).
        fallback: ``worst_of_k`` (run it when PGD does not apply) or ``none`` (report robust=True
            with ``info["skipped"]``; only sensible when worst_of_k is listed after PGD anyway).
        fallback_k: ``k`` of the fallback worst-of-k (default: the profile's ``attack_k``).
    """

    name = "pgd_eot"
    defaults = {"steps": 10, "restarts": 2, "eot": 8, "step_size": 0.25, "candidates": "all",
                "fallback": "worst_of_k", "fallback_k": 10}
    from_profile = {"fallback_k": "attack_k"}

    def __init__(self, **settings):
        super().__init__(**settings)
        s = self.settings
        for key in ("steps", "restarts", "eot"):
            if int(s[key]) < 1 or int(s[key]) != s[key]:
                raise BenchError(f"attack 'pgd_eot': {key} must be a positive integer, got {s[key]!r}.")
        if not float(s["step_size"]) > 0:
            raise BenchError(f"attack 'pgd_eot': step_size must be > 0 (a fraction of the budget), got {s['step_size']!r}.")
        if s["candidates"] not in ("all", "best"):
            raise BenchError(f"attack 'pgd_eot': candidates must be 'all' or 'best', got {s['candidates']!r}.")
        if s["fallback"] not in ("worst_of_k", "none"):
            raise BenchError(f"attack 'pgd_eot': fallback must be 'worst_of_k' or 'none', got {s['fallback']!r}.")

    # ------------------------------------------------------------------ loss
    def smoothed_log_probs(self, defense, x: torch.Tensor, transformation: Transformation, theta: torch.Tensor,
                           generator: torch.Generator) -> torch.Tensor | None:
        """EoT estimate of log smoothed class probabilities ``[R, K]`` at parameters ``theta [R, m]``.

        One batch of ``R * eot`` images (each parameter repeated ``eot`` times); each image gets one
        independent draw of the defense's noise. None if the defense has no attack surface.
        """
        e = int(self.settings["eot"])
        th = theta.repeat_interleave(e, dim=0)
        imgs = transformation.apply(x.expand(len(th), -1, -1, -1), th.to(x.dtype))
        logits = defense.noisy_logits(imgs, transformation, generator)
        if logits is None:
            return None
        # log(mean_e softmax_e) = logsumexp_e(log_softmax_e) - log(e): stable where the softmax saturates
        # (a confident model far from the worst case still gets a non-zero gradient).
        logp = torch.log_softmax(logits.double(), dim=1).reshape(len(theta), e, -1)
        return (torch.logsumexp(logp, dim=1) - math.log(e)).cpu()

    # ------------------------------------------------------------------- run
    def run(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budget: float,
            generator: torch.Generator) -> AttackResult:
        return self.run_budgets(defense, x, y, transformation, [budget], generator)[0]

    def run_budgets(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budgets: list[float],
                    generator: torch.Generator) -> list[AttackResult]:
        """Optimise every budget's restarts in one batch (``len(budgets) * restarts * eot`` images per step),
        then judge each budget's proposals on the real transformation."""
        t = transformation
        if not t.differentiable:
            return [self._fallback(defense, x, y, t, b, generator, f"{t.name} has no gradient in theta") for b in budgets]
        s = self.settings
        steps, restarts = int(s["steps"]), int(s["restarts"])
        radius = torch.tensor([float(b) for b in budgets], dtype=torch.float64).repeat_interleave(restarts)[:, None]
        theta = project(torch.cat([t.sample(restarts, b, generator).double() for b in budgets]), t, radius)
        best_loss = torch.full((len(theta),), -float("inf"), dtype=torch.float64)
        best_theta = theta.clone()
        with torch.enable_grad():
            # steps gradient evaluations, then one more forward to score the final iterate
            for step in range(steps + 1):
                th = theta.float().requires_grad_(step < steps)
                logp = self.smoothed_log_probs(defense, x, t, th, generator)
                if logp is None:
                    why = (f"defense '{getattr(defense, 'name', type(defense).__name__)}' has no attack surface "
                           "(noisy_logits returned None)")
                    return [self._fallback(defense, x, y, t, b, generator, why) for b in budgets]
                losses = -logp[:, y]
                better = losses.detach() > best_loss
                best_loss = torch.where(better, losses.detach(), best_loss)
                best_theta[better] = theta[better]
                if step == steps:
                    break
                (grad,) = torch.autograd.grad(losses.sum(), th)
                grad = torch.nan_to_num(grad.double(), nan=0.0, posinf=0.0, neginf=0.0)
                if t.norm == "linf" or t.dim == 1:
                    direction = grad.sign()
                else:
                    direction = grad / grad.norm(dim=1, keepdim=True).clamp_min(1e-30)
                theta = project(theta + float(s["step_size"]) * radius * direction, t, radius)
        return [self._judge(defense, x, y, t, b, theta[i * restarts:(i + 1) * restarts],
                            best_theta[i * restarts:(i + 1) * restarts], best_loss[i * restarts:(i + 1) * restarts],
                            generator) for i, b in enumerate(budgets)]

    def _judge(self, defense, x, y, t: Transformation, budget: float, final: torch.Tensor, best: torch.Tensor,
               best_loss: torch.Tensor, generator: torch.Generator) -> AttackResult:
        """Evaluate one budget's proposals with the real transformation and the defense's predict."""
        top = int(best_loss.argmax())
        if self.settings["candidates"] == "best":
            candidates = best[top:top + 1]
        else:
            candidates = torch.cat([final, best[top:top + 1]])
        candidates = candidates.float()
        info = {"best_loss": float(best_loss[top])}
        if is_integer(t):
            candidates = snap_integer(candidates, t, budget)
            info["rounded"] = "integer threat model: proposals rounded to the nearest integer point of the region"
        res = self.evaluate(defense, x, y, t, unique_rows(candidates), generator)
        res.info = info
        return res

    def _fallback(self, defense, x, y, transformation, budget, generator, why: str) -> AttackResult:
        if self.settings["fallback"] == "none":
            return AttackResult(True, [], 0, info={"skipped": why})
        res = WorstOfK(k=int(self.settings["fallback_k"])).run(defense, x, y, transformation, budget, generator)
        res.fallback, res.info = WorstOfK.name, {"reason": why}
        return res
