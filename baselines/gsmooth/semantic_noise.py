"""The noise GSmooth adds in the semantic layer and the metric it induces.

GSmooth's classifier is G(x) = E f(H(F1(theta) + theta' + F2(x))) with
theta ~ N(0, s1^2 I_m), theta' ~ N(0, s2^2 I_n) and F1(theta) = A1 theta + b1.
Since F1 is linear, eta = A1 theta + theta' ~ N(0, Sigma) with
Sigma = s2^2 I_n + s1^2 A1 A1^T: G is anisotropic Gaussian smoothing of
h(w) = f(H(b1 + w)) at z = F2(x). After the change of variables
w = Sigma^{-1/2} z, Cohen et al.'s theorem says Phi^{-1}(G_A) is 1-Lipschitz in
the Mahalanobis norm ||v||_{Sigma^-1} = sqrt(v^T Sigma^-1 v). Everything here is
about computing that norm cheaply (n is thousands, m is 1 or 2).

Woodbury: Sigma^-1 = s2^-2 [I - A1 (s2^2/s1^2 I_m + A1^T A1)^-1 A1^T], one m x m
Cholesky factor, so a distance costs two products with A1.
"""
from __future__ import annotations

import torch


class SemanticNoise:
    """Sigma = sigma2^2 I_n + sigma1^2 A A^T with Woodbury-based Mahalanobis norms (float64)."""

    def __init__(self, A: torch.Tensor, sigma1: float, sigma2: float):
        if A.ndim != 2:
            raise ValueError(f"A1 must be [n, m], got {tuple(A.shape)}")
        if not (sigma1 > 0 and sigma2 > 0):
            raise ValueError(f"sigma1 and sigma2 must be positive, got {sigma1}, {sigma2}")
        self.A = A.detach().to(torch.float64)
        self.sigma1, self.sigma2 = float(sigma1), float(sigma2)
        m = self.A.shape[1]
        K = (self.sigma2 ** 2 / self.sigma1 ** 2) * torch.eye(m, dtype=torch.float64, device=self.A.device)
        self._chol = torch.linalg.cholesky(K + self.A.T @ self.A)

    @property
    def n(self) -> int:
        return self.A.shape[0]

    def mahalanobis(self, v: torch.Tensor) -> torch.Tensor:
        """||v||_{Sigma^-1} for v [..., n] (Woodbury; never forms an n x n matrix)."""
        v = v.to(torch.float64)
        av = v @ self.A  # [..., m]
        sol = torch.cholesky_solve(av.unsqueeze(-1), self._chol).squeeze(-1)
        d2 = ((v * v).sum(-1) - (av * sol).sum(-1)) / self.sigma2 ** 2
        return d2.clamp_min(0).sqrt()

    def whiten(self, v: torch.Tensor) -> torch.Tensor:
        """Sigma^{-1/2} v for v [..., n], so that ||whiten(v)|| = ||v||_{Sigma^-1} (for Jacobian norms).

        With A = Q R (thin QR) and c R R^T = V diag(lam) V^T, Sigma = s2^2 (I + U diag(lam) U^T)
        for U = Q V with orthonormal columns, hence
        Sigma^{-1/2} = s2^-1 (I + U (diag((1 + lam)^{-1/2}) - I) U^T).
        """
        v = v.to(torch.float64)
        Q, R = torch.linalg.qr(self.A)  # A = Q R, Q [n, m]
        c = (self.sigma1 / self.sigma2) ** 2
        lam, V = torch.linalg.eigh(c * R @ R.T)  # A A^T c = Q (c R R^T) Q^T
        U = Q @ V
        scale = (1 + lam.clamp_min(0)).rsqrt() - 1
        return (v + ((v @ U) * scale) @ U.T) / self.sigma2

    def dense_inverse(self) -> torch.Tensor:
        """Sigma^-1 by a direct inverse (tests only; O(n^3))."""
        n = self.n
        sigma = self.sigma2 ** 2 * torch.eye(n, dtype=torch.float64) + self.sigma1 ** 2 * self.A @ self.A.T
        return torch.linalg.inv(sigma)

    def sample(self, k: int, generator: torch.Generator) -> torch.Tensor:
        """``k`` draws of eta = A1 theta + theta' ([k, n], float32) from one generator."""
        m = self.A.shape[1]
        theta = torch.randn(k, m, generator=generator, dtype=torch.float64) * self.sigma1
        theta_p = torch.randn(k, self.n, generator=generator, dtype=torch.float64) * self.sigma2
        return (theta @ self.A.T.cpu() + theta_p).float()
