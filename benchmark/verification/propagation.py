"""Sound bounds on a CNN's outputs: interval (IBP), forward linear in a low-dimensional parameter, and
backward linear (CROWN / DeepPoly back-substitution), all in float64 on :mod:`network` layers.

* ``interval``: IBP (centre/radius through affine layers, monotone ReLU and max-pool).
* ``forward_linear``: every neuron keeps linear lower/upper functions of the parameter z (dimension
  m = 1 or 2) as in DeepG/DeepPoly; ReLU uses the triangle relaxation (upper chord u/(u-l)(x-l),
  lower slope 1 if u >= -l else 0); a 2x2 max-pool's lower function is the window input with the
  largest lower bound, its upper function that input if its lower bound dominates every other
  upper bound, else the constant max of the upper bounds (DeepPoly's max rule). Concrete bounds
  at every layer are the intersection of the linear bounds' range over the z box and IBP from the
  previous layer's concrete bounds (both sound, so their intersection is).
* ``backward``: lower bounds of the outputs by back-substituting the same relaxations from the output
  (CROWN / DeepPoly), concretized at every layer over that layer's box and, where the trace has them,
  its linear functions of z (at the input: the image's relaxation in theta, DeepG's substitution).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from benchmark.verification.network import Affine, Layer, ReLU

Bounds = dict[int, tuple[torch.Tensor, torch.Tensor]]  # layer index -> concrete (l, u) of its input


def _affine_interval(layer: Affine, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mid, rad = (lo + hi) / 2, (hi - lo) / 2
    m, r = layer.lin(mid) + layer.bias, layer.lin(rad, layer.abs)
    return m - r, m + r


def _windows(x: torch.Tensor) -> torch.Tensor:
    """``[B, C, H, W]`` -> ``[B, C, H/2, W/2, 4]`` (the four inputs of each 2x2 window)."""
    b, c, h, w = x.shape
    return x.reshape(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 2, 4, 3, 5).reshape(b, c, h // 2, w // 2, 4)


def relu_relaxation(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(alpha, s, t): alpha x <= relu(x) <= s x + t for x in [lo, hi] (CROWN's adaptive lower slope)."""
    active, dead = lo >= 0, hi <= 0
    unstable = ~(active | dead)
    s = torch.where(active, 1.0, 0.0).to(lo.dtype)
    s = torch.where(unstable, hi / (hi - lo).clamp(min=1e-300), s)
    t = torch.where(unstable, -s * lo, torch.zeros_like(lo))
    alpha = torch.where(active | (unstable & (hi >= -lo)), 1.0, 0.0).to(lo.dtype)
    return alpha, s, t


def pool_relaxation(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For a max-pool input's bounds ``[N, C, H, W]``: (index ``[N, C*H/2*W/2]``: the flat position in
    ``C*H*W`` of each window's input with the largest lower bound, dominated ``[N, C, H/2, W/2]``: that
    input is the max everywhere, umax: max upper bound). The relaxations select that input with a
    gather (forward) or place a coefficient at it with a scatter (backward)."""
    lw, uw = _windows(lo), _windows(hi)
    best = lw.argmax(-1, keepdim=True)
    others = uw.scatter(-1, best, -torch.inf).amax(-1)
    dominated = lw.gather(-1, best)[..., 0] >= others
    n, c, h, w = lo.shape
    where = _windows(torch.arange(c * h * w).view(1, c, h, w)).expand(n, -1, -1, -1, -1)
    return where.gather(-1, best).flatten(1), dominated, uw.amax(-1)


@dataclass
class Trace:
    """What a forward pass leaves for the backward one: concrete bounds ``boxes[i]`` of layer i's input
    (``i = len(layers)``: the output) and, for linear passes, its linear functions ``syms[i]`` of z with
    the z boxes."""

    boxes: Bounds = field(default_factory=dict)
    syms: Bounds = field(default_factory=dict)
    z_lo: torch.Tensor | None = None
    z_hi: torch.Tensor | None = None


def interval(layers: list[Layer], lo: torch.Tensor, hi: torch.Tensor) -> Trace:
    """IBP from the input box ``[lo, hi]`` (``[N, *in_shape]``): concrete bounds at every layer input
    and at the output (``boxes[len(layers)]``)."""
    tr = Trace()
    for i, layer in enumerate(layers):
        tr.boxes[i] = (lo, hi)
        if isinstance(layer, Affine):
            lo, hi = _affine_interval(layer, lo, hi)
        elif isinstance(layer, ReLU):
            lo, hi = lo.clamp(min=0), hi.clamp(min=0)
        else:
            lo, hi = _windows(lo).amax(-1), _windows(hi).amax(-1)
    tr.boxes[len(layers)] = (lo, hi)
    return tr


def _concretize(sym: torch.Tensor, z_lo: torch.Tensor, z_hi: torch.Tensor, upper: bool) -> torch.Tensor:
    """Range end of ``sym [N, m+1, *shape]`` (coefficients then constant) over the box ``z [N, m]``."""
    m = z_lo.shape[1]
    view = (len(z_lo), m) + (1,) * (sym.dim() - 2)
    mid, rad = ((z_lo + z_hi) / 2).view(view), ((z_hi - z_lo) / 2).view(view)
    coef = sym[:, :m]
    spread = (coef.abs() * rad).sum(1)
    return sym[:, m] + (coef * mid).sum(1) + (spread if upper else -spread)


def forward_linear(layers: list[Layer], sym_lo: torch.Tensor, sym_hi: torch.Tensor, z_lo: torch.Tensor,
                   z_hi: torch.Tensor, box_lo: torch.Tensor, box_hi: torch.Tensor) -> Trace:
    """Forward linear bounds in z. ``sym_lo, sym_hi [N, m+1, *in_shape]``: the input's lower/upper linear
    functions of z over the boxes ``z_lo, z_hi [N, m]``; ``box_lo, box_hi [N, *in_shape]``: sound concrete
    input bounds. Returns the concrete bounds and linear functions at every layer input and the output."""
    n, m1 = sym_lo.shape[:2]
    lo = torch.maximum(box_lo, _concretize(sym_lo, z_lo, z_hi, False))
    hi = torch.minimum(box_hi, _concretize(sym_hi, z_lo, z_hi, True))
    tr = Trace(z_lo=z_lo, z_hi=z_hi)
    for i, layer in enumerate(layers):
        tr.boxes[i], tr.syms[i] = (lo, hi), (sym_lo, sym_hi)
        if isinstance(layer, Affine):
            flat_lo, flat_hi = sym_lo.reshape(n * m1, *sym_lo.shape[2:]), sym_hi.reshape(n * m1, *sym_hi.shape[2:])
            new_lo = layer.lin(flat_lo, layer.pos) + layer.lin(flat_hi, layer.neg)
            new_hi = layer.lin(flat_hi, layer.pos) + layer.lin(flat_lo, layer.neg)
            sym_lo, sym_hi = new_lo.view(n, m1, *layer.out_shape), new_hi.view(n, m1, *layer.out_shape)
            sym_lo[:, -1] += layer.bias
            sym_hi[:, -1] += layer.bias
            i_lo, i_hi = _affine_interval(layer, lo, hi)
            lo = torch.maximum(i_lo, _concretize(sym_lo, z_lo, z_hi, False))
            hi = torch.minimum(i_hi, _concretize(sym_hi, z_lo, z_hi, True))
        elif isinstance(layer, ReLU):
            alpha, s, t = relu_relaxation(lo, hi)
            sym_lo = sym_lo * alpha[:, None]
            sym_hi = sym_hi * s[:, None]
            sym_hi[:, -1] += t
            lo, hi = lo.clamp(min=0), hi.clamp(min=0)
        else:
            index, dominated, umax = pool_relaxation(lo, hi)
            pick = lambda s: s.flatten(2).gather(2, index[:, None].expand(-1, m1, -1))  # noqa: E731
            sym_lo = pick(sym_lo).view(n, m1, *layer.out_shape)
            up = pick(sym_hi).view(n, m1, *layer.out_shape)
            const = torch.zeros_like(up)
            const[:, -1] = umax
            sym_hi = torch.where(dominated[:, None], up, const)
            lo, hi = _windows(lo).amax(-1), umax
    tr.boxes[len(layers)], tr.syms[len(layers)] = (lo, hi), (sym_lo, sym_hi)
    return tr


def box_runs(box: torch.Tensor) -> list[tuple[int, slice]]:
    """(box index, row slice) of every run of equal consecutive entries of ``box [Q]``. The backward pass
    keeps its rows sorted by box (``nonzero`` order, then filtered), so each box's rows form one run and
    per-box tensors can be broadcast over a slice instead of gathered row by row (the same arithmetic,
    without copying a box's tensors once per row)."""
    values, counts = torch.unique_consecutive(box, return_counts=True)
    ends = counts.cumsum(0).tolist()
    return [(b, slice(e - c, e)) for b, c, e in zip(values.tolist(), counts.tolist(), ends)]


def _signs(lam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The positive and negative parts of ``lam``."""
    return lam.clamp(min=0), lam.clamp(max=0)


def _lower_at(tr: Trace, i: int, lam: torch.Tensor, const: torch.Tensor, box: torch.Tensor,
              runs: list[tuple[int, slice]], signs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """min of lam . x + const over layer i's input set (its box, and its linear functions if any): ``[Q]``
    for the (box, row) pairs of ``lam [Q, *shape]`` (``box [Q]``: their box index, ``runs``: its
    :func:`box_runs`, ``signs``: its :func:`_signs`)."""
    pos, neg = signs[0].flatten(1), signs[1].flatten(1)
    lo, hi = tr.boxes[i]
    lo, hi = lo.flatten(1), hi.flatten(1)
    val = const + torch.cat([(pos[r] * lo[b]).sum(1) for b, r in runs]) \
        + torch.cat([(neg[r] * hi[b]).sum(1) for b, r in runs])
    if i in tr.syms:
        s_lo, s_hi = (s.flatten(2) for s in tr.syms[i])
        single = len(lam) == 1
        g = torch.cat([(_bmm_box(s_lo[b], pos[r], single) + _bmm_box(s_hi[b], neg[r], single))[..., 0]
                       for b, r in runs])  # [Q, m+1]
        g[:, -1] += const
        val = torch.maximum(val, _concretize(g, tr.z_lo[box], tr.z_hi[box], False))
    return val


def _bmm_box(sym: torch.Tensor, rows: torch.Tensor, single: bool) -> torch.Tensor:
    """``sym [m+1, P]`` times each of ``rows [R, P]``: ``[R, m+1, 1]``, the batched product the gathered
    ``sym[box] @ rows[..., None]`` computes, with ``sym`` broadcast (stride 0) rather than copied R times.
    ``single``: whether that gathered product had one row. ``bmm`` of a single product takes another BLAS
    path (other round-off) than one of several, so a lone row of a larger product is computed as two."""
    if len(rows) == 1 and not single:
        return _bmm_box(sym, rows.expand(2, -1), False)[:1]
    return torch.bmm(sym.expand(len(rows), -1, -1), rows[:, :, None])


def backward(layers: list[Layer], tr: Trace, tol: float = 0.0) -> torch.Tensor:
    """Lower bounds ``[N, K]`` of every output by back-substitution (CROWN / DeepPoly) through the
    relaxations at ``tr``'s bounds. DeepPoly's incremental back-substitution: at every layer input the
    bound so far is concretized over that layer's bounds (box, and linear functions in z if the trace has
    them), the best bound is kept, and outputs whose bound exceeds ``tol`` stop there (only the rest
    are substituted further, which is where the cost is)."""
    last = len(layers)
    lo_out = tr.boxes[last][0]
    n, k = lo_out.shape
    best = lo_out.clone()
    if last in tr.syms:
        best = torch.maximum(best, _concretize(tr.syms[last][0], tr.z_lo, tr.z_hi, False))
    box, row = (best <= tol).nonzero(as_tuple=True)
    lam = torch.eye(k, dtype=torch.float64)[row]
    const = torch.zeros(len(row), dtype=torch.float64)
    signs = None  # _signs(lam), kept for the next ReLU or pool step while no row stops
    runs = box_runs(box)  # recomputed only when rows stop (box changes)
    for i in range(last - 1, -1, -1):
        if not len(row):
            break
        layer = layers[i]
        if isinstance(layer, Affine):
            const = const + (lam * layer.bias).flatten(1).sum(-1)
            lam = layer.lin_t(lam.reshape(-1, *layer.out_shape))
        elif isinstance(layer, ReLU):
            alpha, s, t = relu_relaxation(*tr.boxes[i])
            pos, neg = signs or _signs(lam)
            const = const + torch.cat([(neg[r] * t[b]).flatten(1).sum(-1) for b, r in runs])
            lam = torch.cat([pos[r] * alpha[b] + neg[r] * s[b] for b, r in runs])
        else:
            index, dominated, umax = pool_relaxation(*tr.boxes[i])
            pos, neg = signs or _signs(lam)
            free = ~dominated
            const = const + torch.cat([(neg[r] * free[b] * umax[b]).flatten(1).sum(-1) for b, r in runs])
            lam = torch.zeros(len(lam), index.shape[1] * 4, dtype=lam.dtype)
            for b, r in runs:
                lam[r].scatter_(1, index[b].expand(r.stop - r.start, -1), (pos[r] + neg[r] * dominated[b]).flatten(1))
            lam = lam.view(-1, *tr.boxes[i][0].shape[1:])
        signs = _signs(lam)
        val = _lower_at(tr, i, lam, const, box, runs, signs)
        best[box, row] = torch.maximum(best[box, row], val)
        keep = val <= tol
        if not keep.all():  # rows whose bound exceeds tol stop here
            lam, const, box, row, signs = lam[keep], const[keep], box[keep], row[keep], None
            runs = box_runs(box)
    return best
