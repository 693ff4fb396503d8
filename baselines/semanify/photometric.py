"""Perturbation layers for brightness and contrast+brightness: exact linear maps over a parameter box.

* brightness x + b is linear in b: the layer is ``image = A z + c`` with z = b, A = 1, c = x.
* contrast+brightness exp(k)(x + b) is bilinear in (exp(k), b). With u = exp(k) and w = u b the
  image is u x + w, exactly linear in z = (u, w). For a box of (k, b) the reachable (u, w) lie in
  the box [exp(k_lo), exp(k_hi)] x [min, max of u b over the four corners] (u b is bilinear in
  (u, b), so its extremes over the (u, b) box are at corners). Bounding over that (u, w) box is a
  sound linear relaxation that keeps every pixel tied to the same two variables, so CROWN sees
  the correlation between pixels instead of independent pixel intervals.

Each layer returns (A ``[P, m']``, c ``[P]``, z_lo ``[N, m']``, z_hi ``[N, m']``) in float64.
"""
from __future__ import annotations

import torch


def brightness_layer(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
    """Linear layer for x + b with b in ``[lo[n], hi[n]]`` (``lo, hi [N, 1]``)."""
    flat = x.reshape(-1).to(torch.float64)
    a = torch.ones(flat.numel(), 1, dtype=torch.float64)
    return a, flat, lo.to(torch.float64), hi.to(torch.float64)


def contrast_brightness_layer(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
    """Linear layer for exp(k)(x + b) over boxes ``lo, hi [N, 2]`` of (k, b), in variables (u, w)."""
    flat = x.reshape(-1).to(torch.float64)
    lo, hi = lo.to(torch.float64), hi.to(torch.float64)
    u_lo, u_hi = torch.exp(lo[:, 0]), torch.exp(hi[:, 0])
    corners = torch.stack([u_lo * lo[:, 1], u_lo * hi[:, 1], u_hi * lo[:, 1], u_hi * hi[:, 1]])
    a = torch.stack([flat, torch.ones_like(flat)], dim=1)
    z_lo = torch.stack([u_lo, corners.amin(0)], dim=1)
    z_hi = torch.stack([u_hi, corners.amax(0)], dim=1)
    return a, torch.zeros_like(flat), z_lo, z_hi


LINEAR_LAYERS = {"brightness": brightness_layer, "contrast_brightness": contrast_brightness_layer}
