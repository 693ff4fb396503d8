"""AugMix (Hendrycks et al., ICLR 2020): a plain classifier trained on AugMix views with the
Jensen-Shannon consistency loss. Empirical baseline for common corruptions; not certified.

Training objective per batch (the paper's): ``CE(f(x), y) + lambda * JS(p(x), p(v1), p(v2))``
with two independent AugMix views ``v1, v2`` of each image and ``lambda = 12``. The views come
from :class:`torchvision.transforms.AugMix` (which works on uint8 tensors of any channel count,
so 1-channel digits need no special case). torchvision draws from torch's global generator, so
each batch runs it under ``torch.random.fork_rng`` seeded from the training generator: the
training stays a function of the config seed and leaves the global state untouched.

On cifar10 the defense can instead load a RobustBench corruptions-zoo model (config key
``robustbench_model``, e.g. ``Hendrycks2020AugMix_ResNeXt`` or ``Hendrycks2020AugMix_WRN``) from
local checkpoint files only: ``<robustbench_model_dir or --data-root/robustbench_models>/cifar10/
corruptions/<name>.pt``; an absent file is a BenchError naming it.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.api import BenchError, ClassifierDefense, Context, classifier_spec


def js_consistency(logits: list[torch.Tensor]) -> torch.Tensor:
    """Jensen-Shannon divergence among the softmax distributions of ``logits`` (mean KL to their mixture).

    Written out (a few lines) because torch has no JS divergence; the mixture is clamped away
    from 0 before its log, as in the AugMix paper's code, so the loss stays finite. Its gradient must
    stay finite too: a confident model's softmax underflows to exactly 0 (a logit gap above about 104 in
    float32), where the KL's derivative in its target, log p + 1, is -inf and the softmax's backward
    multiplies it by that 0, which is NaN (the MNIST AugMix model trained 60 epochs became all NaN so).
    ``where(p > 0, p, 0)`` has the same values, and passes no gradient where p = 0: there the term p log p
    is 0 and flat. Wherever every p > 0 the loss and its gradient are the same, bit for bit, as before.
    """
    probs = [F.softmax(z, dim=1) for z in logits]
    log_mix = torch.clamp(torch.stack(probs).mean(dim=0), 1e-7, 1.0).log()
    targets = [torch.where(p > 0, p, torch.zeros_like(p)) for p in probs]
    return sum(F.kl_div(log_mix, p, reduction="batchmean") for p in targets) / len(targets)


def augmix_views(x: torch.Tensor, generator: torch.Generator, augmix: nn.Module) -> torch.Tensor:
    """One AugMix view of every image of ``x [B,C,H,W]`` (floats in [0,1]); each image gets its own chain."""
    u8 = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = torch.stack([augmix(img) for img in u8])
    return out.to(x.dtype) / 255


class AugMix(ClassifierDefense):
    """Plain classifier trained with AugMix views and the Jensen-Shannon consistency loss."""

    name = "augmix"
    certified = False
    defaults = {"severity": 3, "width": 3, "depth": -1, "alpha": 1.0, "js_lambda": 12.0,
                "robustbench_model": None, "robustbench_model_dir": None}
    description = "AugMix + Jensen-Shannon consistency (Hendrycks et al. 2020); empirical, not certified"
    paper = "https://arxiv.org/abs/1912.02781"
    code = "https://github.com/google-research/augmix"

    def prepare(self, ctx: Context) -> None:
        self.device = ctx.device
        if self.config["robustbench_model"]:
            self.model = self._robustbench(ctx)
            return
        c = self.config
        lam = float(c["js_lambda"])
        views: list[nn.Module] = []  # torchvision's AugMix, built on the first training batch (see below)

        def loss_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            if not views:
                # imported only when the model is trained: torchvision's import pulls in torch._dynamo (about
                # 1.7 s and 170 MB in every worker of a run that loads the model from the zoo)
                from torchvision.transforms import AugMix as TVAugMix

                views.append(TVAugMix(severity=int(c["severity"]), mixture_width=int(c["width"]),
                                      chain_depth=int(c["depth"]), alpha=float(c["alpha"])))
            aug = views[0]
            v1, v2 = augmix_views(x.cpu(), gen, aug).to(x.device), augmix_views(x.cpu(), gen, aug).to(x.device)
            clean, a1, a2 = model(torch.cat([x, v1, v2])).chunk(3)
            return F.cross_entropy(clean, y) + lam * js_consistency([clean, a1, a2])

        desc = {"name": "augmix-js", "severity": int(c["severity"]), "width": int(c["width"]),
                "depth": int(c["depth"]), "alpha": float(c["alpha"]), "js_lambda": lam}
        self.model = ctx.model(classifier_spec(ctx, "augmix", desc, None, loss_fn=loss_fn))

    def _robustbench(self, ctx: Context) -> nn.Module:
        from benchmark.api import load_robustbench_model

        name = str(self.config["robustbench_model"])
        if ctx.dataset.spec.name != "cifar10":
            raise BenchError(f"augmix: robustbench_model '{name}' is a CIFAR-10 corruptions model, but the task's "
                             f"dataset is '{ctx.dataset.spec.name}'; remove robustbench_model for other datasets.")
        model_dir = self.config["robustbench_model_dir"] or (Path(ctx.data_root) / "robustbench_models"
                                                              if ctx.data_root is not None else None)
        if model_dir is None:
            raise BenchError(f"augmix: robustbench_model '{name}' needs its checkpoint under --data-root DIR "
                             f"(DIR/robustbench_models/cifar10/corruptions/{name}.pt) or robustbench_model_dir.")
        return load_robustbench_model(name, "cifar10", "corruptions", model_dir).to(ctx.device).eval()

