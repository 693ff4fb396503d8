"""Perturbation bounds (the registry's geometric pixel bounds, semanify's photometric layers): they contain
the REAL transformed pixels for dense parameter samples."""
import pytest
import torch

from benchmark.transformations.bounds.photometric import brightness_layer, contrast_brightness_layer
from benchmark.datasets import get_dataset
from benchmark.transformations import get_transformation
from benchmark.transformations.bounds.bilinear import bilinear_at, bilinear_range
from benchmark.transformations.bounds.geometric import rotation_coordinate_boxes, scaling_coordinate_boxes


@pytest.fixture(scope="module")
def images():
    x, _ = get_dataset("digits").load("test")
    return x[[0, 7, 123]]


@pytest.mark.parametrize("name,values", [("rotation", [-47.0, -3.3, 0.0, 12.5, 90.0, 179.0]),
                                         ("scaling", [-0.4, -0.05, 0.0, 0.17, 0.9])])
def test_source_coordinates_match_the_real_transformation(images, name, values):
    """Bilinear sampling at our exact source coordinates reproduces the registry's output (conventions:
    kornia's rotation direction and align_corners=True; affine_grid's align_corners=False for zoom)."""
    t = get_transformation(name)
    boxes = rotation_coordinate_boxes if name == "rotation" else scaling_coordinate_boxes
    for v in values:
        th = torch.tensor([v], dtype=torch.float64)
        u, _, w, _ = boxes(28, 28, th, th)
        for x in images:
            real = t.apply(x[None], torch.tensor([[v]]))[0, 0].flatten().double()
            assert (real - bilinear_at(x[0].double(), u[0], w[0])).abs().max() < 2e-5, (name, v)


def test_bilinear_range_is_exact_over_boxes(images):
    img = images[0, 0].double()
    g = torch.Generator().manual_seed(0)
    u_lo = torch.rand(300, generator=g, dtype=torch.float64) * 32 - 2  # some boxes reach the zero padding
    v_lo = torch.rand(300, generator=g, dtype=torch.float64) * 32 - 2
    u_hi = u_lo + torch.rand(300, generator=g, dtype=torch.float64) * 2.5
    v_hi = v_lo + torch.rand(300, generator=g, dtype=torch.float64) * 2.5
    lo, hi = bilinear_range(img, u_lo, u_hi, v_lo, v_hi)
    s = torch.linspace(0, 1, 61, dtype=torch.float64)
    uu = u_lo[:, None, None] + (u_hi - u_lo)[:, None, None] * s[None, :, None]
    vv = v_lo[:, None, None] + (v_hi - v_lo)[:, None, None] * s[None, None, :]
    vals = bilinear_at(img, uu.expand(-1, 61, 61), vv.expand(-1, 61, 61)).flatten(1)
    assert (vals.amin(1) >= lo - 1e-12).all() and (vals.amax(1) <= hi + 1e-12).all()  # sound
    assert (vals.amin(1) - lo).max() < 0.05 and (hi - vals.amax(1)).max() < 0.05  # and tight (grid is 1/24 px)


@pytest.mark.parametrize("name,lo,width", [("rotation", [-20.0, -0.5, 0.0, 44.5, 89.75, 179.0], 0.5),
                                           ("rotation", [-10.0, 5.0], 2.0),
                                           ("scaling", [-0.2, -0.005, 0.0, 0.1, 0.55], 0.005),
                                           ("scaling", [-0.1, 0.3], 0.03)])
def test_geometric_bounds_contain_real_pixels(images, name, lo, width):
    t = get_transformation(name)
    lo = torch.tensor(lo, dtype=torch.float64)
    hi = torch.minimum(lo + width, torch.tensor(t.high[0], dtype=torch.float64))
    for x in images:
        p_lo, p_hi = (b.flatten(1) for b in t.pixel_bounds(x[None].double(), lo[:, None], hi[:, None]))
        for n in range(len(lo)):
            theta = torch.linspace(float(lo[n]), float(hi[n]), 301)[:, None]
            real = t.apply(x[None].expand(len(theta), -1, -1, -1), theta).flatten(1).double()
            assert (real >= p_lo[n]).all() and (real <= p_hi[n]).all(), (name, float(lo[n]))


def test_brightness_layer_is_exact(images):
    t = get_transformation("brightness")
    x = images[:1]
    a, c, z_lo, z_hi = brightness_layer(x, torch.tensor([[-0.3]]), torch.tensor([[0.2]]))
    assert float(z_lo) == pytest.approx(-0.3) and float(z_hi) == pytest.approx(0.2)
    b = torch.linspace(-0.3, 0.2, 51, dtype=torch.float64)
    real = t.apply(x.expand(51, -1, -1, -1), b[:, None].float()).flatten(1).double()
    assert (real - (b[:, None] @ a.T + c)).abs().max() < 1e-6


def test_contrast_brightness_relaxation_contains_real_images(images):
    t = get_transformation("contrast_brightness")
    x = images[1:2]
    for box in ([-0.1, -0.2, 0.05, -0.1], [0.0, 0.0, 0.2, 0.2], [-1.0, 0.9, -0.9, 1.0]):
        lo, hi = torch.tensor([box[:2]]), torch.tensor([box[2:]])
        a, c, z_lo, z_hi = contrast_brightness_layer(x, lo, hi)
        k, b = torch.meshgrid(torch.linspace(box[0], box[2], 41), torch.linspace(box[1], box[3], 41), indexing="ij")
        theta = torch.stack([k.flatten(), b.flatten()], dim=1)
        th = theta.double()  # the exact (u, w) of each parameter; float32 round-off of the real images is
        z = torch.stack([torch.exp(th[:, 0]), torch.exp(th[:, 0]) * th[:, 1]], dim=1)  # ~1e-7 (MARGIN_TOL)
        assert (z >= z_lo - 1e-12).all() and (z <= z_hi + 1e-12).all()  # (u, w) stay in the box
        real = t.apply(x.expand(len(theta), -1, -1, -1), theta).flatten(1).double()
        assert (real - (z @ a.T + c)).abs().max() < 1e-5  # and the layer is exact in (u, w)
