"""deepg: golden tests of the linear relaxation and bound propagation against brute force, and soundness
of certificates on the REAL transformation."""
import pytest
import torch
from torch import nn

from benchmark.verification.network import cnn_layers, margin_layers
from benchmark.verification.propagation import (_concretize, _lower_at, _signs, _windows, backward, box_runs, forward_linear,
                                         interval, pool_relaxation)
from benchmark.verification.relaxation import image_relaxation
from benchmark.verification.margins import margin_bounds
from benchmark.models.architectures import Normalize
from benchmark.transformations import get_transformation


def _tiny(seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    net = nn.Sequential(Normalize([0.5], [0.3]), nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(4 * 7 * 7, 8), nn.ReLU(), nn.Linear(8, 5))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return net.eval()


def _image(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(1, 1, 28, 28)
    x[:, :, 8:20, 10:18] = torch.rand(1, 1, 12, 8, generator=g)
    return x


CASES = [("rotation", [[3.0]], [[5.0]]), ("scaling", [[0.02]], [[0.05]]), ("translation", [[0.2, -0.4]], [[0.6, 0.1]]),
         ("brightness", [[0.05]], [[0.1]]), ("contrast_brightness", [[0.0, -0.05]], [[0.1, 0.05]])]


def _grid(lo, hi, n=41):
    axes = [torch.linspace(float(a), float(b), n, dtype=torch.float64) for a, b in zip(lo[0], hi[0])]
    return torch.cartesian_prod(*axes).view(-1, len(axes))


def _z(name, theta):
    return torch.stack([theta[:, 0].exp(), theta[:, 0].exp() * theta[:, 1]], 1) if name == "contrast_brightness" else theta


@pytest.mark.parametrize("name,lo,hi", CASES)
def test_image_relaxation_brackets_the_real_transformation(name, lo, hi):
    """L(z) <= T(x, theta) <= U(z) on a dense grid, and the linear bounds are tighter than the pixel box."""
    t, x = get_transformation(name), _image(0)
    lo, hi = torch.tensor(lo, dtype=torch.float64), torch.tensor(hi, dtype=torch.float64)
    s_lo, s_hi, _, _, b_lo, b_hi = image_relaxation(t, x, lo, hi, 4)
    theta = _grid(lo, hi)
    img = t.apply(x.expand(len(theta), -1, -1, -1), theta.float()).double()
    z = _z(name, theta)
    m = z.shape[1]
    low = (s_lo[0, :m, None] * z.T.reshape(m, -1, 1, 1, 1)).sum(0) + s_lo[0, m]
    up = (s_hi[0, :m, None] * z.T.reshape(m, -1, 1, 1, 1)).sum(0) + s_hi[0, m]
    assert (low <= img).all() and (img <= up).all()
    gap = float((up - low).amax(0).mean())
    assert gap <= float((b_hi - b_lo).mean()) + 1e-9  # never looser than the interval argument on average
    assert float((up - img).amin(0).mean()) < 0.01  # and tight: on average the upper function nearly touches the image


@pytest.mark.parametrize("seed", [0, 1])
def test_propagated_bounds_against_brute_force(seed):
    """Exact forward pass; IBP, forward-linear and backward bounds contain the brute-force margins of the
    tiny CNN on the real rotation; the linear bounds are at least as tight as IBP and close on a tiny box."""
    net, x, t = _tiny(seed), _image(seed), get_transformation("rotation")
    layers = cnn_layers(net, (1, 28, 28))
    tr = interval(layers, x.double(), x.double())
    assert torch.allclose(tr.boxes[len(layers)][0], net(x).double(), atol=1e-5)
    label = int(net(x).argmax())
    ml = margin_layers(layers, label)
    lo, hi = torch.tensor([[2.0], [4.0]], dtype=torch.float64), torch.tensor([[4.0], [4.05]], dtype=torch.float64)
    for n in range(2):
        theta = _grid(lo[n:n + 1], hi[n:n + 1], 201)
        with torch.no_grad():
            out = net(t.apply(x.expand(len(theta), -1, -1, -1), theta.float())).double()
        true = torch.cat([out[:, label:label + 1] - out[:, :label], out[:, label:label + 1] - out[:, label + 1:]], 1)
        true_min = true.amin(0)
        bounds = {m: margin_bounds(m, ml, t, x, lo[n:n + 1], hi[n:n + 1], 4)[0] for m in ("ibp", "crown", "deepg")}
        for m, b in bounds.items():
            assert (b <= true_min + 1e-6).all(), m
        assert (bounds["deepg"] >= bounds["ibp"] - 1e-9).all()
        s_lo, s_hi, z_lo, z_hi, b_lo, b_hi = image_relaxation(t, x, lo[n:n + 1], hi[n:n + 1], 4)
        fwd = forward_linear(ml, s_lo, s_hi, z_lo, z_hi, b_lo, b_hi)
        assert (fwd.boxes[len(ml)][0][0] <= true_min + 1e-6).all()
        full = backward(ml, fwd, float("inf"))[0]  # back-substitution of every margin to the input
        assert (full <= true_min + 1e-6).all() and (full >= bounds["ibp"] - 1e-9).all()
    gap = (true_min - full).abs().max()  # last box: 0.05 degrees wide
    assert gap < 0.05 * true.abs().max()


@pytest.mark.parametrize("counts", [[1, 3, 2, 1], [1, 0, 0, 0], [0, 2, 0, 1]])
def test_per_box_runs_give_the_gathered_bounds_bit_for_bit(counts):
    """Back-substitution broadcasts each box's bounds and linear functions over its run of rows instead
    of gathering them per row: the same floats exactly, lone rows of a larger batch included (``bmm`` of
    one product rounds differently from a batch of them)."""
    net, x, t = _tiny(1), _image(1), get_transformation("rotation")
    ml = margin_layers(cnn_layers(net, (1, 28, 28)), int(net(x).argmax()))
    lo = torch.tensor([[0.0], [2.0], [4.0], [6.0]], dtype=torch.float64)
    tr = forward_linear(ml, *image_relaxation(t, x, lo, lo + 2.0, 4))
    box = torch.arange(4).repeat_interleave(torch.tensor(counts))
    assert [(b, r.stop - r.start) for b, r in box_runs(box)] == [(b, c) for b, c in enumerate(counts) if c]
    g = torch.Generator().manual_seed(0)
    for i, (s_lo, s_hi) in tr.syms.items():
        lam = torch.randn(len(box), *s_lo.shape[2:], generator=g, dtype=torch.float64)
        const = torch.randn(len(box), generator=g, dtype=torch.float64)
        pos, neg = lam.clamp(min=0).flatten(1), lam.clamp(max=0).flatten(1)
        b_lo, b_hi = tr.boxes[i]
        want = const + (pos * b_lo[box].flatten(1)).sum(1) + (neg * b_hi[box].flatten(1)).sum(1)
        lin = (s_lo[box].flatten(2) @ pos[:, :, None] + s_hi[box].flatten(2) @ neg[:, :, None])[..., 0]
        lin[:, -1] += const
        want = torch.maximum(want, _concretize(lin, tr.z_lo[box], tr.z_hi[box], False))
        assert torch.equal(_lower_at(tr, i, lam, const, box, box_runs(box), _signs(lam)), want), i


def test_pool_index_selects_the_window_input_with_the_largest_lower_bound():
    """The max-pool relaxation's flat index picks, per window, the input with the largest lower bound:
    gathering with it equals the one-hot weighted window sum, and scattering a coefficient there puts it
    at that input and nowhere else (zeros elsewhere)."""
    g = torch.Generator().manual_seed(0)
    lo = torch.randn(3, 2, 6, 4, generator=g, dtype=torch.float64)
    hi = lo + torch.rand(3, 2, 6, 4, generator=g, dtype=torch.float64)
    index, dominated, umax = pool_relaxation(lo, hi)
    onehot = torch.zeros(3, 2, 3, 2, 4, dtype=torch.float64).scatter_(-1, _windows(lo).argmax(-1, keepdim=True), 1.0)
    x = torch.randn(3, 2, 6, 4, generator=g, dtype=torch.float64)
    assert torch.equal(x.flatten(1).gather(1, index).view(3, 2, 3, 2), (_windows(x) * onehot).sum(-1))
    v = torch.randn(3, 12, generator=g, dtype=torch.float64)
    placed = torch.zeros(3, 48, dtype=torch.float64).scatter_(1, index, v).view(3, 2, 6, 4)
    assert torch.equal(_windows(placed), v.view(3, 2, 3, 2, 1) * onehot)
    assert torch.equal(umax, _windows(hi).amax(-1))
    others = torch.where(onehot.bool(), -torch.inf, _windows(hi)).amax(-1)
    assert torch.equal(dominated, (_windows(lo) * onehot).sum(-1) >= others)


@pytest.mark.parametrize("name", ["rotation", "scaling"])
def test_ibp_and_crown_start_from_the_relaxations_pixel_box(name):
    """For geometric transformations IBP and CROWN-IBP skip DeepG's slopes and offsets: their bounds are
    those propagated from the relaxation's pixel box, bit for bit."""
    net, x, t = _tiny(2), _image(2), get_transformation(name)
    ml = margin_layers(cnn_layers(net, (1, 28, 28)), int(net(x).argmax()))
    lo = torch.tensor([[0.0], [0.01]], dtype=torch.float64)
    hi = lo + 0.01
    b_lo, b_hi = image_relaxation(t, x, lo, hi, 1)[4:]
    tr = interval(ml, b_lo, b_hi)
    assert torch.equal(margin_bounds("ibp", ml, t, x, lo, hi), tr.boxes[len(ml)][0])
    assert torch.equal(margin_bounds("crown", ml, t, x, lo, hi), backward(ml, tr))


def test_backward_is_the_adjoint_of_forward():
    """The conv adjoint used in back-substitution: <lin(x), y> = <x, lin_t(y)> for every affine layer."""
    layers = cnn_layers(_tiny(3), (1, 28, 28))
    g = torch.Generator().manual_seed(0)
    for layer in layers:
        if hasattr(layer, "lin_t"):
            x = torch.randn(2, *layer.in_shape, generator=g, dtype=torch.float64)
            y = torch.randn(2, *layer.out_shape, generator=g, dtype=torch.float64)
            assert torch.allclose((layer.lin(x) * y).sum(), (x * layer.lin_t(y)).sum())


def test_recorded_proof_is_rechecked_and_tampering_is_caught():
    """A deepg certificate's boxes re-verify from the row and model; a removed box or inflated margin fails."""
    from baselines.deepg.defense import DeepG
    from benchmark.audit.bound_proofs import proof_problems, uncovered

    assert uncovered([([-1.0], [0.0]), ([0.0], [1.0])], 1.0, (-5.0,), (5.0,)) is None
    assert uncovered([([-1.0, -1.0], [0.0, 1.0])], 1.0, (-5.0, -5.0), (5.0, 5.0)) == [0.5, 0.0]
    net, x, t = _tiny(0), _image(0), get_transformation("brightness")
    d = DeepG(splits=4)
    d.model, d.layers, d.device, d.splits = net, cnn_layers(net, (1, 28, 28)), "cpu", 4
    label = int(net(x).argmax())
    (c,) = d.certify(x, t, [0.002, 0.004], torch.Generator().manual_seed(0))
    assert c.radius > 0 and proof_problems(c.stats, net, x, t, label) == []
    removed = {**c.stats, "verified_boxes": c.stats["verified_boxes"][1:]}
    assert any("in no verified box" in p for p in proof_problems(removed, net, x, t, label))
    inflated = {**c.stats, "verified_boxes": [[a, b, m + 1.0] for a, b, m in c.stats["verified_boxes"]]}
    assert any("recomputed margin" in p for p in proof_problems(inflated, net, x, t, label))
