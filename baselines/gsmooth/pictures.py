"""A picture grid for a fitted surrogate: real transformation, surrogate, surrogate with semantic noise."""
from __future__ import annotations

from pathlib import Path

import torch

from baselines.gsmooth.surrogate import Surrogate
from baselines.gsmooth.training import real_transform
from benchmark.api import Transformation

_PAD = 2  # px between tiles


@torch.no_grad()
def save_surrogate_grid(path: Path, surrogate: Surrogate, t: Transformation, x: torch.Tensor, budget: float,
                        sigma2: float, seed: int = 0) -> Path:
    """Rows: images; column groups: real tau(theta, x), surrogate, surrogate + N(0, s2^2) semantic noise,
    for theta at 0, budget/2 and budget (each coordinate). Written as a PNG.

    The tiles are tiled into one image (:func:`_tile`) drawn on a single axes: a matplotlib axes per tile
    (54 of them for 6 images) cost about 1.4 s per task, paid by every run's ``prepare``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gen = torch.Generator().manual_seed(seed)
    dev = surrogate.unit.device
    x = x.to(dev)
    thetas = [0.0, budget / 2, budget]
    columns, titles = [], []
    for th in thetas:
        theta = torch.full((len(x), t.dim), th, device=dev)
        real = real_transform(t, x, theta)
        z = surrogate.F2(x) + surrogate.F1(theta)
        sur = surrogate.H(z)
        noisy = surrogate.H(z + (torch.randn(z.shape, generator=gen) * sigma2).to(dev))
        columns += [real, sur, noisy]
        titles += [f"{name}\n{t.name}={th:g}" for name in ("real", "surrogate", "+noise")]
    n, cols = len(x), len(columns)
    tiles = torch.stack(columns, 1).flatten(0, 1).clamp(0, 1).float().cpu()  # row-major: image i, column j
    grid = _tile(tiles, cols)
    fig, ax = plt.subplots(figsize=(1.2 * cols, 1.2 * n + 0.7))
    ax.imshow(grid.permute(1, 2, 0).numpy(), vmin=0, vmax=1)  # matplotlib wants arrays, not tensors
    step = x.shape[-1] + _PAD
    ax.set_xticks([_PAD + step * j + x.shape[-1] / 2 for j in range(cols)], titles, fontsize=6)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    fig.suptitle(f"GSmooth surrogate for {t.name} ({t.units}); noise sigma2={sigma2:g}", fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _tile(tiles: torch.Tensor, cols: int) -> torch.Tensor:
    """``[N, C, H, W]`` tiles as one ``[3, H', W']`` image, ``cols`` per row, ``_PAD`` white px around each.

    Written here rather than taken from ``torchvision.utils.make_grid``: importing torchvision pulls in
    ``torch._dynamo`` (about 1.7 s and 170 MB per process), and this runs in every run's worker processes.
    """
    n, c, h, w = tiles.shape
    rows = -(-n // cols)
    grid = tiles.new_ones(3, rows * (h + _PAD) + _PAD, cols * (w + _PAD) + _PAD)
    for i, tile in enumerate(tiles.expand(-1, 3, -1, -1) if c == 1 else tiles):
        top, left = _PAD + (i // cols) * (h + _PAD), _PAD + (i % cols) * (w + _PAD)
        grid[:, top:top + h, left:left + w] = tile
    return grid
