"""Geometric transformations about the image centre: rotation and scaling.

Both use bilinear interpolation with zero padding outside the image and are
differentiable in ``theta`` (almost everywhere: bilinear interpolation is
piecewise linear in the sampling coordinates). kornia is imported lazily, only
when a rotation is actually computed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.autograd import forward_ad

from benchmark.transformations.base import Kind, Norm, Transformation


def rotate_images(x: torch.Tensor, angle_deg: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [B,C,H,W]`` by ``angle_deg [B]`` degrees counter-clockwise (as displayed,
    rows going down) about the image centre ``((W-1)/2, (H-1)/2)``; bilinear, zero padding.

    Differentiable in ``x`` and ``angle_deg`` (kornia builds the rotation matrix with
    differentiable ops). Angle 0 reproduces ``x`` up to ~1e-6 interpolation round-off.
    """
    from kornia.geometry.transform import rotate  # lazy: keep `import benchmark.transformations` light

    plain = x.dim() == 4 and x.dtype in (torch.float32, torch.float64) and angle_deg.shape in ((len(x),), (1,))
    if plain and _untracked(x, angle_deg) and (out := _rotate_untracked(x, angle_deg.to(x.dtype))) is not None:
        return out
    return rotate(x, angle_deg.to(x.dtype), mode="bilinear", padding_mode="zeros", align_corners=True)


def _untracked(*tensors: torch.Tensor) -> bool:
    """No derivative flows through ``tensors``: none requires grad, is inside a ``torch.func`` transform
    or carries a forward-mode tangent (then a rotation needs no graph, and kornia's is not replayed)."""
    from torch._C._functorch import is_functorch_wrapped_tensor

    return not any(t.requires_grad or is_functorch_wrapped_tensor(t) or forward_ad.unpack_dual(t).tangent is not None
                   for t in tensors)


def _kornia_inverse():
    """The closed-form 3x3 inverse kornia's ``warp_affine`` uses (None on a kornia without it)."""
    try:
        from kornia.geometry.transform.imgwarp import _inverse_3x3_closed_form
    except ImportError:
        return None
    return _inverse_3x3_closed_form


def _rotate_untracked(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor | None:
    """kornia's ``rotate(x, angle, "bilinear", "zeros", align_corners=True)``, bit for bit, about 2x faster on
    large batches (tests/transformations/test_rotate_fast.py compares the two).

    Why: kornia 0.9's ``warp_affine`` builds its sampling grid as ``m00 * X + m01 * Y + m02`` on full
    [B, H, W] grids and then stacks the two axes, several times the cost of ``grid_sample`` itself on
    28 x 28 images (SPT's interpolation bound rotates ~80,000 images per example). The matrix is kornia's
    own; the grid takes the same float operations in the same order, but multiplies each row (column) of
    coordinates once and broadcasts the products, and writes both axes in place. Without autograd only:
    gradients keep kornia's graph. None on a kornia without that matrix inverse (kornia's rotate then runs)."""
    from kornia.geometry.conversions import convert_affinematrix_to_homography, normalize_homography
    from kornia.geometry.transform import get_rotation_matrix2d

    inverse = _kornia_inverse()
    if inverse is None:
        return None
    b, _, h, w = x.shape
    k = 1 if angle.shape == (1,) and b > 0 else b  # kornia shares one grid for a single angle
    centre = torch.tensor([(w - 1) / 2, (h - 1) / 2], dtype=x.dtype, device=x.device).expand(k, -1)
    rot = get_rotation_matrix2d(centre, angle.expand(k), torch.ones_like(centre))[..., :2, :3]
    m = inverse(normalize_homography(convert_affinematrix_to_homography(rot), (h, w), (h, w),
                                                      align_corners=True))
    xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype, device=x.device)[None, None, :]
    ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype, device=x.device)[None, :, None]
    # each axis written contiguously, then viewed as [k, H, W, 2]: writing the interleaved layout directly
    # took ~4x as long (strided stores); grid_sample reads the strided view at the same speed
    axes = torch.empty(2, k, h, w, dtype=x.dtype, device=x.device)
    for axis in range(2):
        torch.add(m[:, axis, 0, None, None] * xs, m[:, axis, 1, None, None] * ys, out=axes[axis])
        axes[axis] += m[:, axis, 2, None, None]
    grid = axes.permute(1, 2, 3, 0)
    return F.grid_sample(x, grid.expand(b, -1, -1, -1), mode="bilinear", padding_mode="zeros", align_corners=True)


def zoom_images(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Zoom ``x [B,C,H,W]`` by per-sample ``factor [B]`` (>1 enlarges the content) about the
    image centre; bilinear, zero padding (only reached when ``factor < 1``).

    Output pixel at normalised position ``p`` samples the input at ``p / factor``
    (``align_corners=False``, so normalised coordinates are proportional to pixel
    offsets from the centre). Differentiable in ``x`` and ``factor``.
    """
    B = x.shape[0]
    inv = 1.0 / factor.to(x.dtype)
    zero = torch.zeros_like(inv)
    mat = torch.stack(
        [torch.stack([inv, zero, zero], dim=-1), torch.stack([zero, inv, zero], dim=-1)], dim=1
    )  # [B, 2, 3]
    grid = F.affine_grid(mat, [B, *x.shape[1:]], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


@dataclass(frozen=True)
class Rotation(Transformation):
    """Rotation by ``theta = (angle,)`` degrees in [-180, 180], counter-clockwise positive
    (as the image is displayed), about the image centre; bilinear, zero padding (the
    corners that rotate in from outside are black)."""

    composition = "sum"  # up to interpolation error
    pixel_mask = "circular"
    defense_defaults = {"tss": {"scale": 0.4}, "gsmooth": {"sigma1": 8.0, "pose": "orientation"},
                        "verifier": {"splits": 10},
                        "spt": {"sigma_gamma": 12.0, "sigma_delta": 0.6, "error": 1.0, "kappa": 0.1}}

    name: str = "rotation"
    dim: int = 1
    kind: Kind = "resolvable"
    norm: Norm = "l2"
    units: str = "degrees (counter-clockwise)"
    low: tuple[float, ...] = (-180.0,)
    high: tuple[float, ...] = (180.0,)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "rotation about the centre, bilinear, zero padding"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return rotate_images(x, theta[:, 0])

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output pixel (i, j) is the bilinear interpolant f of x (zero outside) at the source point
        (u, v)(a) = c + R(a) (j - c_x, i - c_y). Over an angle interval, u and v each range over an
        exactly computed interval (R cos(a + phi): endpoints or +-R where a + phi crosses a multiple
        of pi), so (u, v) stays in their product box. f is bilinear on every unit cell, so its min and
        max over a box are attained on the grid {box edges, integers between} (exact range). The box
        is widened by COORD_SLACK px (float32 coordinate and angle round-off of kornia's rotate,
        ~1e-5 px) and values by VALUE_SLACK (float32 interpolation round-off). See bounds/geometric.py.
        """
        from benchmark.transformations.bounds.geometric import rotation_bounds

        return rotation_bounds(x, lo[:, 0], hi[:, 0])

    def period(self, image_shape: tuple[int, ...]) -> tuple[float, ...]:
        return (360.0,)

    def _parameter_lipschitz(self, x: torch.Tensor, budget: float, mask: torch.Tensor) -> float:
        """The source point of output pixel p moves at ``|p - c| pi/180`` px per degree (bounds/lipschitz.py)."""
        from benchmark.transformations.bounds.lipschitz import interpolation_lipschitz, rotation_speed2

        return interpolation_lipschitz(x, rotation_speed2(*x.shape[-2:]), mask)


@dataclass(frozen=True)
class Scaling(Transformation):
    """Zoom about the image centre by factor ``1 + theta`` with ``theta`` in [-0.5, 1.0]
    (factor in [0.5, 2]; positive theta enlarges the content, negative shrinks it and
    pads with zeros); bilinear."""

    composition = "product"  # factors 1 + theta multiply, up to interpolation error
    defense_defaults = {"tss": {"scale": 0.4}, "gsmooth": {"sigma1": 0.08, "pose": "log_radius"},
                        "verifier": {"splits": 10}}

    name: str = "scaling"
    dim: int = 1
    kind: Kind = "resolvable"
    norm: Norm = "l2"
    units: str = "scale factor minus 1"
    low: tuple[float, ...] = (-0.5,)
    high: tuple[float, ...] = (1.0,)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "zoom about the centre by factor 1+theta, bilinear, zero padding"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return zoom_images(x, 1.0 + theta[:, 0])

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output pixel (i, j) is the bilinear interpolant of x at u = c_x + (j - c_x)/s,
        v = c_y + (i - c_y)/s, s = 1 + theta > 0: both are monotone in 1/s, so the interval's endpoints
        give their exact ranges, and the exact bilinear range over that box (widened by COORD_SLACK px,
        values by VALUE_SLACK for float32 round-off) bounds the pixel, as for rotation.
        """
        from benchmark.transformations.bounds.geometric import scaling_bounds

        return scaling_bounds(x, lo[:, 0], hi[:, 0])

    def _parameter_lipschitz(self, x: torch.Tensor, budget: float, mask: torch.Tensor) -> float:
        """The source point moves at most ``|p - c| / (1 - B)^2`` px per unit of theta (bounds/lipschitz.py)."""
        from benchmark.transformations.bounds.lipschitz import interpolation_lipschitz, scaling_speed2

        return interpolation_lipschitz(x, scaling_speed2(*x.shape[-2:], budget), mask)


ROTATION = Rotation()
SCALING = Scaling()
