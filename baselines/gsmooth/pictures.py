"""A picture grid for a fitted surrogate: real transformation, surrogate, surrogate with semantic noise."""
from __future__ import annotations

from pathlib import Path

import torch

from baselines.gsmooth.surrogate import Surrogate
from baselines.gsmooth.training import real_transform
from benchmark.transformations.base import Transformation


@torch.no_grad()
def save_surrogate_grid(path: Path, surrogate: Surrogate, t: Transformation, x: torch.Tensor, budget: float,
                        sigma2: float, seed: int = 0) -> Path:
    """Rows: images; column groups: real tau(theta, x), surrogate, surrogate + N(0, s2^2) semantic noise,
    for theta at 0, budget/2 and budget (each coordinate). Written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gen = torch.Generator().manual_seed(seed)
    dev = surrogate.unit.device
    x = x.to(dev)
    thetas = [0.0, budget / 2, budget]
    cols = []
    for th in thetas:
        theta = torch.full((len(x), t.dim), th, device=dev)
        real = real_transform(t, x, theta)
        z = surrogate.F2(x) + surrogate.F1(theta)
        sur = surrogate.H(z)
        noisy = surrogate.H(z + (torch.randn(z.shape, generator=gen) * sigma2).to(dev))
        cols.append((th, real, sur, noisy))
    n = len(x)
    fig, axes = plt.subplots(n, 3 * len(thetas), figsize=(1.2 * 3 * len(thetas), 1.25 * n + 0.5))
    for j, (th, real, sur, noisy) in enumerate(cols):
        for k, (name, imgs) in enumerate((("real", real), ("surrogate", sur), ("+noise", noisy))):
            for i in range(n):
                ax = axes[i, 3 * j + k]
                img = imgs[i].clamp(0, 1).detach().cpu().numpy()  # matplotlib wants arrays, not tensors
                ax.imshow(img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0), cmap="gray", vmin=0, vmax=1)
                ax.axis("off")
                if i == 0:
                    ax.set_title(f"{name}\n{t.name}={th:g}", fontsize=6)
    fig.suptitle(f"GSmooth surrogate for {t.name} ({t.units}); noise sigma2={sigma2:g}", fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
