"""Parameter-space attacks: PGD+EoT finds known worst cases, averages over the noise it is given,
never leaves the budget region or the domain; fallback where there is no gradient; the grid covers the region."""
import copy
import dataclasses
import math

import pytest
import torch

from attacks import build_attack, get_attack_class, resolve_settings
from attacks.base import ParameterAttack
from attacks.grid import GridSearch
from attacks.pgd_eot import PGDEoT
from attacks.region import contains, integer_points, project, snap_integer
from attacks.worst_of_k import WorstOfK
from benchmark.defense import Defense
from benchmark.errors import BenchError
from benchmark.transformations import get_transformation
from benchmark.transformations.translation import integer_ball


class ParamDefense(Defense):
    """Deterministic toy defense whose logits are a known function ``score(theta)`` of the parameter,
    recovered exactly from the transformed image (so the worst case is known in closed form)."""

    name = "param"

    def __init__(self, recover, score):
        super().__init__()
        self.recover, self.score = recover, score

    def prepare(self, ctx):
        pass

    def noisy_logits(self, x, transformation, generator):
        return self.score(self.recover(x))

    def predict(self, x, transformation, generator):
        with torch.no_grad():
            return self.noisy_logits(x, transformation, generator).argmax(1)


def brightness_theta(x):  # x0 is the constant image 0.5, brightness adds theta
    return x.mean(dim=(1, 2, 3))[:, None] - 0.5


CB_X0 = torch.tensor([0.25, 0.75]).view(1, 1, 1, 2)


def contrast_brightness_theta(x):  # x0 = (0.25, 0.75), image = exp(k) * (x0 + b)
    k = torch.log(2 * (x[..., 1] - x[..., 0]).flatten())
    b = x[..., 0].flatten() / torch.exp(k) - 0.25
    return torch.stack([k, b], dim=1)


def bump(theta_star, width):
    """Class 1 wins only within ``width`` of ``theta_star`` (1-D): logit_1 = 1 - (d / width)^2, logit_0 = 0."""
    def score(theta):
        d = (theta[:, 0] - theta_star) / width
        return torch.stack([torch.zeros_like(d), 1 - d ** 2, torch.full_like(d, -5.0)], dim=1)
    return score


def test_pgd_finds_narrow_interior_worst_case():
    t = get_transformation("brightness")
    x = torch.full((1, 1, 4, 4), 0.5)
    defense = ParamDefense(brightness_theta, bump(-0.3, 0.1))
    g = torch.Generator().manual_seed(0)
    assert WorstOfK(k=0).run(defense, x, 0, t, 0.5, g).robust  # the extremes +-0.5 miss it
    for seed in range(3):
        res = PGDEoT(steps=10, restarts=1, eot=1, step_size=0.25).run(
            defense, x, 0, t, 0.5, torch.Generator().manual_seed(seed))
        assert not res.robust and res.confident_wrong and res.fallback is None
        assert abs(res.theta[0] + 0.3) <= 0.1 + 1e-6


@pytest.mark.parametrize("norm,expected", [("linf", (0.2, -0.2)), ("l2", (0.2 / math.sqrt(2), -0.2 / math.sqrt(2)))])
def test_pgd_finds_worst_corner_in_2d(norm, expected):
    """Class 1 wins iff k - b > c: the worst case is the corner (l-inf) or the boundary point along (1,-1) (l2),
    which neither the extremes (axis points) nor a few random draws reach."""
    t = dataclasses.replace(get_transformation("contrast_brightness"), norm=norm)
    c = 0.3 if norm == "linf" else 0.25

    def score(theta):
        s = 20 * (theta[:, 0] - theta[:, 1] - c)
        return torch.stack([torch.zeros_like(s), s], dim=1)

    defense = ParamDefense(contrast_brightness_theta, score)
    g = torch.Generator().manual_seed(1)
    assert WorstOfK(k=3).run(defense, CB_X0, 0, t, 0.2, g).robust
    res = PGDEoT(steps=10, restarts=2, eot=1, step_size=0.25).run(defense, CB_X0, 0, t, 0.2, g)
    assert not res.robust and res.confident_wrong
    th = torch.tensor(res.theta)
    assert th[0] - th[1] > c and float(t.norm_of(th[None])) <= 0.2 + 1e-6  # a breaking point inside the ball
    if norm == "linf":  # sign steps reach the worst corner exactly
        assert torch.allclose(th, torch.tensor(expected), atol=1e-6)


class CoinDefense(Defense):
    """Noisy toy surface: each noisy_logits call flips a q-coin per image (from the generator it is given);
    heads -> logits (0, c, 0), tails -> (c, 0, 0). Smoothed probabilities: q sm(0,c,0) + (1-q) sm(c,0,0)."""

    name = "coin"

    def __init__(self, q=0.3, c=2.0):
        super().__init__()
        self.q, self.c = q, c

    def prepare(self, ctx):
        pass

    def predict(self, x, transformation, generator):
        return torch.zeros(len(x), dtype=torch.int64)

    def draws(self, n, generator):
        return torch.rand(n, generator=generator) < self.q

    def noisy_logits(self, x, transformation, generator):
        heads = self.draws(len(x), generator)
        on = torch.tensor([0.0, self.c, 0.0])
        off = torch.tensor([self.c, 0.0, 0.0])
        return torch.where(heads[:, None], on, off) + 0 * x.sum(dim=(1, 2, 3))[:, None]

    def analytic(self):
        on = torch.softmax(torch.tensor([0.0, self.c, 0.0], dtype=torch.float64), 0)
        off = torch.softmax(torch.tensor([self.c, 0.0, 0.0], dtype=torch.float64), 0)
        return self.q * on + (1 - self.q) * off


def test_eot_averages_over_the_defense_noise():
    t = get_transformation("brightness")
    x = torch.full((1, 1, 4, 4), 0.5)
    d = CoinDefense()
    theta = torch.tensor([[0.1], [-0.2]])
    # exactly the mean of the softmax over the draws the generator gives (R*E images, one draw each)
    atk = PGDEoT(eot=16)
    logp = atk.smoothed_log_probs(d, x, t, theta, torch.Generator().manual_seed(5))
    heads = d.draws(2 * 16, torch.Generator().manual_seed(5)).view(2, 16).double()
    p = d.analytic()  # fraction of heads h: h sm(on) + (1-h) sm(off)
    on = torch.softmax(torch.tensor([0.0, d.c, 0.0], dtype=torch.float64), 0)
    off = torch.softmax(torch.tensor([d.c, 0.0, 0.0], dtype=torch.float64), 0)
    h = heads.mean(1, keepdim=True)
    assert torch.allclose(logp.exp(), h * on + (1 - h) * off, atol=1e-12)
    # the generator controls it: same seed same estimate, another seed another one
    again = atk.smoothed_log_probs(d, x, t, theta, torch.Generator().manual_seed(5))
    other = atk.smoothed_log_probs(d, x, t, theta, torch.Generator().manual_seed(6))
    assert torch.equal(logp, again) and not torch.equal(logp, other)
    # many draws converge to the analytic expectation (4 standard errors)
    big = PGDEoT(eot=20000).smoothed_log_probs(d, x, t, theta[:1], torch.Generator().manual_seed(7)).exp()[0]
    se = (on - off).abs() * math.sqrt(d.q * (1 - d.q) / 20000)
    assert ((big - p).abs() <= 4 * se + 1e-12).all()


def test_eot_gradient_is_the_mean_over_draws():
    """The PGD gradient of the smoothed loss averages over the noise: with noise n ~ N(0,1) added to theta,
    E[d/dtheta] is the derivative of the Gaussian-smoothed loss, which we compare with finite differences."""
    t = get_transformation("brightness")
    x = torch.full((1, 1, 4, 4), 0.5)

    class Shifted(Defense):
        name = "shifted"

        def prepare(self, ctx):
            pass

        def predict(self, x, transformation, generator):
            return torch.zeros(len(x), dtype=torch.int64)

        def noisy_logits(self, x, transformation, generator):
            th = brightness_theta(x)[:, 0] + torch.randn(len(x), generator=generator, dtype=x.dtype)
            return torch.stack([torch.zeros_like(th), 3 * th], dim=1)

    d, atk = Shifted(), PGDEoT(eot=4000)
    th = torch.tensor([[0.2]], requires_grad=True)
    loss = -atk.smoothed_log_probs(d, x, t, th, torch.Generator().manual_seed(0))[0, 0]
    (grad,) = torch.autograd.grad(loss, th)
    h = 0.05
    lp = -atk.smoothed_log_probs(d, x, t, torch.tensor([[0.2 + h]]), torch.Generator().manual_seed(0))[0, 0]
    lm = -atk.smoothed_log_probs(d, x, t, torch.tensor([[0.2 - h]]), torch.Generator().manual_seed(0))[0, 0]
    fd = (lp - lm) / (2 * h)
    assert float(grad) > 0 and abs(float(grad) - float(fd)) < 0.05 * abs(float(fd))


class LinearNoisy(Defense):
    """A fixed random linear classifier with Gaussian input noise: a generic surface pushing theta around."""

    name = "linear"

    def __init__(self, shape, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(math.prod(shape), 3, generator=g)

    def prepare(self, ctx):
        pass

    def noisy_logits(self, x, transformation, generator):
        noise = 0.1 * torch.randn(x.shape, generator=generator, dtype=x.dtype)
        return (x + noise).flatten(1) @ self.w

    def predict(self, x, transformation, generator):
        with torch.no_grad():
            return (x.flatten(1) @ self.w).argmax(1)


CASES = [("brightness", 0.3), ("contrast_brightness", 0.2), ("contrast_brightness:l2", 0.2), ("translation", 2.5),
         ("gaussian_blur", 2.0), ("rotation", 10.0), ("scaling", 0.2)]


def _transformation(name):
    base, _, norm = name.partition(":")
    t = get_transformation(base)
    return dataclasses.replace(t, norm=norm) if norm else t


def _in_continuous_region(theta, t, budget):
    tol = 1e-5 * max(1.0, budget)
    lo, hi = torch.tensor(t.low, dtype=theta.dtype), torch.tensor(t.high, dtype=theta.dtype)
    ok = (t.norm_of(theta) <= budget + tol) & ((theta >= lo - tol) & (theta <= hi + tol)).all(-1)
    if t.one_sided:
        ok &= (theta >= -tol).all(-1)
    return bool(ok.all())


@pytest.mark.parametrize("name,budget", CASES)
def test_pgd_never_leaves_budget_or_domain(name, budget, monkeypatch):
    t = _transformation(name)
    cls = type(t)
    applied, evaluated = [], []
    orig_apply, orig_eval = cls._apply, ParameterAttack.evaluate

    def spy_apply(self, x, theta):
        applied.append(theta.detach().clone())
        return orig_apply(self, x, theta)

    def spy_eval(defense, x, y, transformation, thetas, generator, chunk=64):
        evaluated.append(thetas.clone())
        return orig_eval(defense, x, y, transformation, thetas, generator, chunk)

    monkeypatch.setattr(cls, "_apply", spy_apply)
    monkeypatch.setattr(PGDEoT, "evaluate", staticmethod(spy_eval))
    x = torch.rand(1, 1, 12, 12, generator=torch.Generator().manual_seed(3))
    d = LinearNoisy(x.shape)
    for y in range(3):  # different labels push theta in different directions
        # step_size 1.5: every step overshoots, so only the projection keeps theta inside
        res = PGDEoT(steps=6, restarts=3, eot=2, step_size=1.5).run(d, x, y, t, budget,
                                                                    torch.Generator().manual_seed(y))
        assert res.fallback is None
        assert bool(contains(torch.tensor([res.theta]), t, budget).all())
    assert applied and all(_in_continuous_region(th.double(), t, budget) for th in applied)
    assert evaluated and all(bool(contains(th, t, budget).all()) for th in evaluated)
    # several budgets in one batch: each budget's proposals stay inside its own region
    evaluated.clear()
    small = budget / 3
    out = PGDEoT(steps=4, restarts=2, eot=2, step_size=1.5).run_budgets(d, x, 1, t, [small, budget],
                                                                     torch.Generator().manual_seed(9))
    assert len(out) == 2 and len(evaluated) == 2
    assert bool(contains(evaluated[0], t, small).all()) and bool(contains(evaluated[1], t, budget).all())
    if name == "translation":
        assert all(torch.equal(th, th.round()) for th in evaluated)
        assert res.info["rounded"]


def test_projection_and_snapping():
    t = get_transformation("translation")
    th = project(torch.tensor([[3.0, 4.0], [0.3, -0.2]], dtype=torch.float64), t, 2.5)
    assert torch.allclose(th[0], torch.tensor([1.5, 2.0], dtype=torch.float64)) and torch.equal(th[1], th.new_tensor([0.3, -0.2]))
    # coordinate rounding of (0.7, 0.7) leaves the unit ball; snapping picks an integer point inside
    s = snap_integer(torch.tensor([[0.7, 0.7]]), t, 1.0)
    assert s.norm() <= 1.0 and torch.equal(s, s.round())
    assert set(map(tuple, integer_points(t, 2.5).tolist())) == set(map(tuple, integer_ball(2.5).tolist()))
    blur = get_transformation("gaussian_blur")  # one-sided: [0, b]
    assert project(torch.tensor([[-1.0], [5.0]]), blur, 2.0).flatten().tolist() == [0.0, 2.0]


def test_pgd_falls_back_without_gradient_or_surface():
    pix = get_transformation("pixelate")
    x = torch.rand(1, 1, 12, 12, generator=torch.Generator().manual_seed(0))
    d = LinearNoisy(x.shape)
    res = PGDEoT(fallback_k=4).run(CoinDefense(), x, 0, pix, 0.4, torch.Generator().manual_seed(0))
    assert res.fallback == "worst_of_k" and "no gradient" in res.info["reason"]
    assert res.robust and res.queries == len(pix.extremes(0.4)) + 4  # CoinDefense always predicts 0

    class NoSurface(LinearNoisy):
        def noisy_logits(self, x, transformation, generator):
            return None

    b = get_transformation("brightness")
    res = PGDEoT(fallback_k=2).run(NoSurface(x.shape), x, 0, b, 0.3, torch.Generator().manual_seed(0))
    assert res.fallback == "worst_of_k" and "attack surface" in res.info["reason"]
    skipped = PGDEoT(fallback="none").run(d, x, 0, pix, 0.4, torch.Generator().manual_seed(0))
    assert skipped.robust and skipped.queries == 0 and "no gradient" in skipped.info["skipped"]


def test_grid_covers_the_region():
    b = get_transformation("brightness")
    assert GridSearch(points=5).candidates(b, 0.5).flatten().tolist() == pytest.approx([-0.5, -0.25, 0, 0.25, 0.5])
    blur = get_transformation("gaussian_blur")
    assert GridSearch(points=5).candidates(blur, 2.0).flatten().tolist() == pytest.approx([0, 0.5, 1, 1.5, 2])
    cb = get_transformation("contrast_brightness")  # l-inf box: the full product grid
    g = GridSearch(points=3).candidates(cb, 0.2)
    ax = torch.tensor([-0.2, 0.0, 0.2])
    assert torch.allclose(g, torch.cartesian_prod(ax, ax))
    assert set(map(tuple, GridSearch().candidates(get_transformation("translation"), 2.5).tolist())) == \
        set(map(tuple, integer_ball(2.5).tolist()))
    # l2 disc: every grid point inside, every point of the disc within one cell diagonal of a grid point
    disc = dataclasses.replace(cb, norm="l2")
    pts = GridSearch(points=9).candidates(disc, 0.2)
    assert bool(contains(pts, disc, 0.2).all())
    sample = disc.sample(3000, 0.2, torch.Generator().manual_seed(0))
    h = 0.4 / 8
    assert float(torch.cdist(sample, pts).min(dim=1).values.max()) <= h * math.sqrt(2) + 1e-6


def test_grid_finds_the_interior_worst_case():
    t = get_transformation("brightness")
    x = torch.full((1, 1, 4, 4), 0.5)
    d = ParamDefense(brightness_theta, bump(-0.3, 0.1))
    g = torch.Generator().manual_seed(0)
    assert GridSearch(points=3).run(d, x, 0, t, 0.5, g).robust
    res = GridSearch(points=21).run(d, x, 0, t, 0.5, g)
    assert not res.robust and abs(res.theta[0] + 0.3) <= 0.1 + 1e-6


def test_registry_and_settings_errors():
    with pytest.raises(BenchError, match="Did you mean 'pgd_eot'"):
        get_attack_class("pgd_eo")
    with pytest.raises(BenchError, match="unknown setting"):
        PGDEoT(stepz=3)
    with pytest.raises(BenchError, match="positive integer"):
        PGDEoT(eot=0)
    with pytest.raises(BenchError, match="points"):
        GridSearch(points=1)
    # precedence: defaults < profile field (attack_k) < suite entry < profile override
    s = resolve_settings({"name": "pgd_eot", "steps": 4}, {"attack_k": 7, "attacks": {"pgd_eot": {"eot": 3}}})
    assert (s["steps"], s["eot"], s["fallback_k"], s["restarts"]) == (4, 3, 7, PGDEoT.defaults["restarts"])
    assert resolve_settings({"name": "worst_of_k"}, {"attack_k": 5}) == {"name": "worst_of_k", "k": 5}
    atk = build_attack(s)
    assert isinstance(atk, PGDEoT) and atk.settings["eot"] == 3


def _linear_classifier():
    """A deterministic classifier on 4x4 images: class 1 when brightness theta > 0.29, else class 0 (x0 = 0.5)."""
    from benchmark.defense import ClassifierDefense

    class Linear(ClassifierDefense):
        name = "linear"

        def prepare(self, ctx):
            pass

    d = Linear()
    d.model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
    with torch.no_grad():
        d.model[1].weight.copy_(torch.tensor([[0.0] * 16, [1.0 / 16] * 16]))
        d.model[1].bias.copy_(torch.tensor([0.0, -0.79]))
    return d


def test_grid_is_dense_for_classifiers_and_few_predicts_for_others():
    from benchmark.run import grid_cache

    grid_cache.share_in(None)  # the run installs the shared store; in memory only here
    t, x, g = get_transformation("brightness"), torch.full((1, 1, 4, 4), 0.5), torch.Generator().manual_seed(0)
    score = bump(0.3, 0.01)
    few = GridSearch(points=[5, 3], dense=[2001, 101]).run(ParamDefense(brightness_theta, score), x, 0, t, 0.4, g)
    assert few.robust and few.queries == 4 and few.info == {"points": 4, "dense": False}  # +-0.4, +-0.2: no 0
    d = _linear_classifier()
    grid = GridSearch(points=[5, 3], dense=[2001, 101])
    dense = grid.run(d, x, 0, t, 0.4, g)
    assert not dense.robust and dense.info == {"points": 2000, "dense": True} and dense.theta[0] > 0.29
    assert dense.queries == 256  # boundary first: the break is in the first chunk
    other = type(d)()  # another defense object with the same weights shares the outcome
    other.model = copy.deepcopy(d.model)
    assert grid_cache.model_digest(other.model) == grid_cache.model_digest(d.model)
    again = grid.run(other, x, 0, t, 0.4, g)
    assert again == dense and again is not dense


def test_a_torn_shared_grid_file_is_recomputed(tmp_path):
    """The shared dense-grid files are a cache written without fsync: a file cut short (a machine crash
    before the data reached the disk) is recomputed, never read as an outcome."""
    from benchmark.run import grid_cache

    t, x, g = get_transformation("brightness"), torch.full((1, 1, 4, 4), 0.5), torch.Generator().manual_seed(0)
    d = _linear_classifier()
    grid = GridSearch(points=[5, 3], dense=[201, 11])
    grid_cache.share_in(tmp_path)
    try:
        first = grid.run(d, x, 0, t, 0.35, g)
        (f,) = tmp_path.glob("*.pkl")
        f.write_bytes(f.read_bytes()[:10])  # torn
        grid_cache._RESULTS.clear()
        again = grid.run(d, x, 0, t, 0.35, g)
    finally:
        grid_cache.share_in(None)
    assert again == first and not again.robust
    assert len(f.read_bytes()) > 10  # rewritten whole


def test_dense_grids_of_nested_budgets_compute_each_shared_point_once():
    """A deterministic classifier's budgets share their grids' common points: every budget's result is the one
    ``ParameterAttack.evaluate`` gives on its own grid, and the classifier sees each distinct point once."""
    from benchmark.run import grid_cache

    t, x, g = get_transformation("brightness"), torch.full((1, 1, 4, 4), 0.5), torch.Generator().manual_seed(0)
    d = _linear_classifier()
    seen: list[int] = []
    d.model[1].register_forward_hook(lambda mod, inp, out: seen.append(len(inp[0])))
    grid = GridSearch(points=[5, 3], dense=[401, 41])
    budgets = [0.1, 0.2, 0.3]  # robust at 0.1 and 0.2; class 1 beyond 0.29 breaks 0.3
    grid_cache._RESULTS.clear()
    shared = grid.run_budgets(d, x, 0, t, budgets, g)
    computed = sum(seen)
    judged: set[tuple[float, ...]] = set()
    for b, res in zip(budgets, shared):
        points = grid.candidates(t, b, [401, 41])
        points = points[t.norm_of(points.double()) > 0]
        points = points[torch.argsort(t.norm_of(points.double()), descending=True, stable=True)]
        alone = ParameterAttack.evaluate(d, x, 0, t, points, g, chunk=256)
        assert (res.robust, res.theta, res.queries, res.confident_wrong) == \
            (alone.robust, alone.theta, alone.queries, alone.confident_wrong)
        judged |= {tuple(p) for p in points[:alone.queries].tolist()}
    assert [r.robust for r in shared] == [True, True, False]
    assert computed == len(judged) < sum(r.queries for r in shared)
