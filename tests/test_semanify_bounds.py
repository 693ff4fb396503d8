"""Semanify bound propagation: golden bounds of a hand-set network, soundness by sampling, CROWN vs IBP."""
import pytest
import torch
from torch import nn

from baselines.semanify.bounds import margin_lower_bounds, margin_network, output_bounds
from baselines.semanify.geometric import geometric_pixel_bounds
from baselines.semanify.network import affine_chain, build_mlp
from baselines.semanify.photometric import brightness_layer, contrast_brightness_layer


def _tiny() -> nn.Sequential:
    """z1 = x1 + x2 + 1, z2 = x1 - x2; outputs h1 - h2 and h1 + h2 (h = relu(z))."""
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 1.0], [1.0, -1.0]]))
        net[0].bias.copy_(torch.tensor([1.0, 0.0]))
        net[2].weight.copy_(torch.tensor([[1.0, -1.0], [1.0, 1.0]]))
        net[2].bias.zero_()
    return net


# Worked by hand for x in [-1, 1]^2: z1 in [-1, 3], z2 in [-2, 2] (both unstable).
# IBP: h1 in [0, 3], h2 in [0, 2], so h1 - h2 in [-2, 3] and h1 + h2 in [0, 5].
# CROWN (upper relaxation u/(u-l) (z - l); lower slope 1 iff u >= -l): h1 <= 0.75 z1 + 0.75, h1 >= z1,
# h2 <= 0.5 z2 + 1, h2 >= z2. h1 - h2 <= -0.25 x1 + 1.75 x2 + 1.5 <= 3.5 and >= 0.5 x1 + 1.5 x2 >= -2;
# h1 + h2 <= 1.25 x1 + 0.25 x2 + 2.5 <= 4 and >= 2 x1 + 1 >= -1. (Exact ranges: [-1, 3] and [0, 4].)
GOLDEN_IBP = ([-2.0, 0.0], [3.0, 5.0])
GOLDEN_CROWN = ([-2.0, -1.0], [3.5, 4.0])


def test_golden_bounds_of_hand_set_network():
    net = _tiny()
    lo, hi = -torch.ones(1, 2, dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)
    for method, (gl, gu) in (("ibp", GOLDEN_IBP), ("crown", GOLDEN_CROWN)):
        l, u = output_bounds(net, lo, hi, method)
        assert l[0].tolist() == pytest.approx(gl, abs=1e-12), method
        assert u[0].tolist() == pytest.approx(gu, abs=1e-12), method
    # the verifier's CROWN margin bound takes the better of CROWN and IBP per output
    assert margin_lower_bounds(net, lo, hi, "crown")[0].tolist() == pytest.approx([-2.0, 0.0], abs=1e-12)
    # sampled outputs lie inside, and the bounds are attained up to the relaxation gap
    x = torch.rand(20000, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1
    y = net(x)
    assert (y.min(0).values >= torch.tensor([-1.0, 0.0]) - 1e-9).all()
    assert (y.max(0).values <= torch.tensor([3.0, 4.0]) + 1e-9).all()


@pytest.fixture(scope="module")
def random_mlp():
    torch.manual_seed(0)
    return build_mlp((1, 28, 28), 10, [0.1307], [0.3081], hidden=(32, 16)).eval()


def test_margin_network_folding_is_exact(random_mlp):
    """Normalize, the perturbation layer and the margin specification are folded in exactly."""
    chain = affine_chain(random_mlp)
    x = torch.rand(1, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    z = torch.tensor([[0.1, -0.05], [0.2, 0.3]], dtype=torch.float64)
    a, c, _, _ = contrast_brightness_layer(x, z, z)
    net = margin_network(chain, 3, (a, c))
    images = (z @ a.T + c).view(2, 1, 28, 28)
    logits = random_mlp.double()(images)
    random_mlp.float()
    want = logits[:, 3:4] - torch.cat([logits[:, :3], logits[:, 4:]], dim=1)
    assert torch.allclose(net(z), want, atol=1e-10)


@pytest.mark.parametrize("method", ["crown", "ibp"])
def test_bounds_are_sound_by_sampling(random_mlp, method):
    chain = affine_chain(random_mlp)
    net = margin_network(chain, 0)
    g = torch.Generator().manual_seed(2)
    centre = torch.rand(4, 784, generator=g, dtype=torch.float64)
    lo, hi = centre - 0.02, centre + 0.02
    l, u = output_bounds(net, lo, hi, method)
    pts = lo + (hi - lo) * torch.rand(2000, 4, 784, generator=g, dtype=torch.float64)
    corners = torch.where(torch.rand(500, 4, 784, generator=g) < 0.5, lo, hi)  # vertices: where ReLUs bite most
    out = net(torch.cat([pts, corners]))
    assert (out >= l - 1e-9).all() and (out <= u + 1e-9).all()


def test_crown_never_looser_than_ibp_on_perturbation_boxes(random_mlp):
    """On the real perturbation layers' boxes the verifier's CROWN margins dominate IBP's, and CROWN is
    strictly tighter somewhere (the point of using it)."""
    chain = affine_chain(random_mlp)
    x = torch.rand(1, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    net = margin_network(chain, 5)
    lo = torch.tensor([-10.0, -2.0, 0.0, 7.5], dtype=torch.float64)
    p_lo, p_hi = geometric_pixel_bounds("rotation", x, lo, lo + 1.0)
    cases = [(net, p_lo, p_hi)]
    a, c, z_lo, z_hi = brightness_layer(x, torch.tensor([[-0.2], [0.0]]), torch.tensor([[0.0], [0.2]]))
    cases.append((margin_network(chain, 5, (a, c)), z_lo, z_hi))
    a, c, z_lo, z_hi = contrast_brightness_layer(x, torch.tensor([[-0.1, -0.1]]), torch.tensor([[0.1, 0.1]]))
    cases.append((margin_network(chain, 5, (a, c)), z_lo, z_hi))
    strictly = False
    for n, lo_, hi_ in cases:
        crown, ibp = margin_lower_bounds(n, lo_, hi_, "crown"), margin_lower_bounds(n, lo_, hi_, "ibp")
        assert (crown >= ibp - 1e-12).all()
        strictly |= bool((crown > ibp + 1e-6).any())
    assert strictly


def test_the_dependencys_torch_jit_deprecation_is_silenced_at_its_source():
    """bound_propagation's @torch.jit.script warns at import (nothing a user can act on): our import is silent."""
    import subprocess
    import sys

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", code], capture_output=True,
                              text=True, timeout=300)

    raw = run("import bound_propagation")
    assert raw.returncode != 0 and "torch.jit.script" in raw.stderr  # the warning exists at the source
    ours = run("from baselines.semanify.bounds import _bound_propagation; _bound_propagation()")
    assert ours.returncode == 0, ours.stderr
