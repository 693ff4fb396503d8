"""Fitting a GSmooth surrogate to a real transformation, and measuring how well it fits.

Objective (weights chosen by measurement, see gsmooth-prototype-findings.md):
* reconstruction: L1 between H(F2(x) + A1 theta + theta') and the real tau(theta, x) for theta
  uniform over the training range, with the semantic noise theta' ~ N(0, s2^2 I) on half of each
  batch and none on the other half: a denoising decoder keeps class information above the noise
  level (without it, resolvability training collapsed the codes of geometric transformations in the
  prototype), and the noise-free half makes H(F2(x) + A1 theta) reproduce the real transformation
  (trained under noise only, the decoder's noise-free reconstructions were as far from tau as tau
  is from x: held-out recon 0.98-4.1);
* resolvability, after ``steps_recon`` steps: lam * ||F2(tau(xi, x)) - F2(x) - A1 xi||^2_{Sigma^-1}
  for xi uniform in the largest budget region, so the *real* transformation moves the encoding
  along A1 (what the sound certificate measures).
One-sided transformations use tau(|theta|, x) for theta < 0 (stated convention).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from baselines.gsmooth.semantic_noise import SemanticNoise
from baselines.gsmooth.surrogate import Surrogate
from benchmark.api import Transformation, progress_bar


@dataclass(frozen=True)
class SurrogateConfig:
    """Surrogate training hyper-parameters (part of the checkpoint's config hash)."""

    steps_recon: int = 600
    steps_resolve: int = 300
    batch_size: int = 64
    lr: float = 2e-3
    lam: float = 0.01
    width: int = 16
    held_out: int = 200
    seed: int = 0
    encoder: str = "local"  # "global" photometric, "pose" geometric (see surrogate.py)
    content_blur: float = 0.0  # pose encoder: Gaussian blur (px) of the canonical code

    def to_dict(self) -> dict:
        return asdict(self)


def real_transform(t: Transformation, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """tau(theta, x) with the one-sided convention tau(|theta|, x), clipped to the domain."""
    th = theta.abs() if t.one_sided else theta
    return t.apply(x, t.clip(th))


def training_range(t: Transformation, budget_max: float, sigma1: float) -> float:
    """Half-width of the uniform theta range the decoder is trained on: budget + 2 sigma1."""
    return budget_max + 2 * sigma1


def train_surrogate(model: Surrogate, x: torch.Tensor, t: Transformation, cfg: SurrogateConfig,
                    sigma1: float, sigma2: float, budget_max: float, device: str = "cpu") -> Surrogate:
    """Train ``model`` on ``x`` minus the held-out tail (see the module docstring)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    model.to(device).train()
    xs = x[: len(x) - cfg.held_out]
    noise = SemanticNoise(model.A1(), sigma1, sigma2)  # on the model's device: the loss below runs there
    R = training_range(t, budget_max, sigma1)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    total = cfg.steps_recon + cfg.steps_resolve
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    with progress_bar(total=total, desc=f"surrogate {t.name}") as bar:
        for step in range(total):
            idx = torch.randint(len(xs), (cfg.batch_size,), generator=gen)
            xb = xs[idx].to(device)
            theta = ((2 * torch.rand(cfg.batch_size, t.dim, generator=gen) - 1) * R).to(device)
            with torch.no_grad():
                target = real_transform(t, xb, theta)
            z = model.F2(xb)
            # half of each batch noise-free: the decoder must reproduce tau(theta, x) from the clean code
            # (the surrogate models its transformation) and denoise under the smoothing noise (so the
            # class survives the noise the classifier is trained under)
            clean = (torch.rand(len(xb), generator=gen) < 0.5).view(-1, 1, 1, 1)
            eps = (torch.randn(z.shape, generator=gen) * sigma2 * (~clean)).to(device)
            loss = F.l1_loss(model.H(z + model.F1(theta) + eps), target)
            if step >= cfg.steps_recon and any(p.requires_grad for p in model.F2.parameters()):
                xi = t.sample(cfg.batch_size, budget_max, gen).to(device)
                with torch.no_grad():
                    moved = t.apply(xb, xi)
                resid = (model.F2(moved) - z - model.F1(xi)).flatten(1)
                loss = loss + cfg.lam * noise.mahalanobis(resid).pow(2).mean().float()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            bar.update(1)
    return model.eval()


@torch.no_grad()
def surrogate_quality(model: Surrogate, x: torch.Tensor, y: torch.Tensor, t: Transformation, sigma1: float,
                      sigma2: float, budget_max: float, seed: int = 1) -> dict:
    """Held-out fit of the surrogate: reconstruction error, resolvability residual, collapse guard.

    * recon_rel_error: mean |tau~ - tau| / mean |tau - x| over theta in the training range (1 = as
      bad as ignoring the transformation);
    * resolvability_median: median ||F2(tau(xi,x)) - F2(x) - A1 xi||_{Sigma^-1}, xi in the largest budget;
    * shift_median: median ||F2(tau(xi,x)) - F2(x)||_{Sigma^-1} (what the sound certificate pays);
    * class_separation_median: median Sigma^-1 distance between codes of different-class images
      (the collapse guard: it must stay well above the certificate margins, about 2).
    """
    gen = torch.Generator().manual_seed(seed)
    dev = model.unit.device
    xs, ys = x.to(dev), y
    noise = SemanticNoise(model.A1().cpu(), sigma1, sigma2)  # its arithmetic runs on the CPU
    R = training_range(t, budget_max, sigma1)
    theta = ((2 * torch.rand(len(xs), t.dim, generator=gen) - 1) * R).to(dev)
    target = real_transform(t, xs, theta)
    recon = model(theta, xs)
    rel = float((recon - target).abs().mean() / (target - xs).abs().mean().clamp_min(1e-8))
    xi = t.sample(len(xs), budget_max, gen).to(dev)
    z0 = model.F2(xs)
    z1 = model.F2(t.apply(xs, xi))
    resid = noise.mahalanobis((z1 - z0 - model.F1(xi)).flatten(1).cpu())
    shift = noise.mahalanobis((z1 - z0).flatten(1).cpu())
    perm = torch.randperm(len(xs), generator=gen)
    diff = ys != ys[perm]
    sep = noise.mahalanobis((z0 - z0[perm.to(dev)]).flatten(1).cpu())[diff]
    return {"recon_rel_error": rel, "resolvability_median": float(resid.median()),
            "shift_median": float(shift.median()),
            "class_separation_median": float(sep.median()) if len(sep) else float("nan"),
            "held_out": len(xs)}
