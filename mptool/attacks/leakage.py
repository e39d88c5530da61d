"""Kullback-Leibler membership information leakage (Farokhi & Kaafar, Definition 2 and
Remark 3, Gaussian approximation).

For record (x_i, y_i), the outputs of models trained with it (z_i = 1) and without it
(z_i = 0) are approximated by Gaussians N(mu_1, S_1), N(mu_0, S_0) fitted to shadow
models' prediction vectors on x_i (Monte-Carlo simulation with and without the record), and

    rho_KL(i) = D_KL(N_1 || N_0) + D_KL(N_0 || N_1),
    D_KL(N_a || N_b) = 0.5 (tr(S_b^-1 S_a) - d + (mu_b - mu_a)^T S_b^-1 (mu_b - mu_a) + ln det S_b / det S_a).

mptool models the black-box output (the binned prediction vector), the quantity an
adversary sees, rather than the parameters theta; the last class is dropped because the
probabilities sum to about one (its covariance would be singular). ``RIDGE`` is added to
each covariance's diagonal so identical shadow outputs stay finite; the leakage is then
bounded, and 0 means the shadows' outputs do not depend on the record.
"""

from __future__ import annotations

import numpy as np

RIDGE = 1e-4


def gaussian_kl(mu_a: np.ndarray, cov_a: np.ndarray, mu_b: np.ndarray, cov_b: np.ndarray) -> float:
    """D_KL(N(mu_a, cov_a) || N(mu_b, cov_b)) for d-dimensional Gaussians."""
    d = len(mu_a)
    inv_b = np.linalg.inv(cov_b)
    diff = mu_b - mu_a
    _, logdet_a = np.linalg.slogdet(cov_a)
    _, logdet_b = np.linalg.slogdet(cov_b)
    return float(0.5 * (np.trace(inv_b @ cov_a) - d + diff @ inv_b @ diff + logdet_b - logdet_a))


def _fit(preds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(preds, dtype=float)
    mu = x.mean(axis=0)
    cov = np.atleast_2d(np.cov(x, rowvar=False, bias=True)) if len(x) > 1 else np.zeros((x.shape[1], x.shape[1]))
    return mu, cov + RIDGE * np.eye(x.shape[1])


def kl_leakage(in_preds: np.ndarray, out_preds: np.ndarray) -> float:
    """Symmetric Gaussian KL leakage rho_KL of one record from in/out shadow prediction vectors."""
    if len(in_preds) == 0 or len(out_preds) == 0:
        return float("nan")
    k = in_preds.shape[1]
    d = max(1, k - 1)
    mu1, s1 = _fit(in_preds[:, :d])
    mu0, s0 = _fit(out_preds[:, :d])
    return gaussian_kl(mu1, s1, mu0, s0) + gaussian_kl(mu0, s0, mu1, s1)
