"""Yeom et al.'s loss-threshold adversary (section 3, Adversaries 1-2 and 3.3).

The adversary predicts "member" when the target model's loss on z = (x, y) is at most a
threshold. Following section 3.3 ("it can repeatedly sample S ~ D^n, train A_S ... and
measure the error"), the threshold is the shadow models' expected *training* loss: the mean
cross-entropy -ln p(y|x) of each shadow on its own training records, over all shadows.
"""

from __future__ import annotations

import numpy as np


def cross_entropy(probs: np.ndarray, y_idx: np.ndarray | int) -> np.ndarray:
    """-ln p(y | x) per row of binned probability vectors (binned values are > 0)."""
    probs = np.atleast_2d(probs)
    y_idx = np.broadcast_to(np.asarray(y_idx), (probs.shape[0],))
    return -np.log(probs[np.arange(probs.shape[0]), y_idx])


def expected_training_loss(preds: np.ndarray, members: np.ndarray, y_idx: np.ndarray) -> float:
    """Mean loss of K shadows on their training records: preds (K, n, k), members (K, n), y_idx (n,)."""
    K, n, _ = preds.shape
    losses = -np.log(preds[:, np.arange(n), y_idx])
    return float(losses[members].mean())


def threshold(q: np.ndarray, y_idx: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Score = tau - loss; "member" iff loss <= tau (ties count as members: a record fitted as
    well as the average training record looks like one)."""
    loss = cross_entropy(q, y_idx)
    score = tau - loss
    return score, loss <= tau + 1e-12
