"""Bounds agree with decisions (red4): a record decided below has pdtp_high <= tau, one decided above pdtp_low >= tau.

The engine's p-values are each record's smallest over the looks (Bonferroni over the L planned looks); the
bounds are reported as the intersection of its repeated bounds (0.05/L each) over the looks it had, so the
look whose p-value decided also bounds it. Before, the bounds were the last look's only, and under BH a
record undecided at an early look (small p, not yet enough across records) could be decided later on that
look's p-value while its last look's bound straddled tau (seed 2 below: pdtp_high 1.04 > tau = 1, decided
below). The engine's loop runs as is on synthetic replicates (no fit): 60 records, 2 classes, gate raw.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import mptool.loo.replicates as rep

K, N, TAU = 2, 60, 1.0


class _Drawn(rep.ReplicateEngine):
    """The replicate engine with its fits replaced by pre-drawn released probabilities."""

    def __init__(self, plan: rep.ReplicatePlan, full: np.ndarray, loo: np.ndarray) -> None:
        super().__init__(plan)
        self.drawn_full, self.drawn_loo = full, loo  # (MAX, n, k), (n, MAX, k)

    def _grow_full(self, request, positions, seed, R, st):  # noqa: ANN001, ANN202 - the engine's signature
        reps = list(range(len(st.full), R))
        st.full = np.concatenate([st.full, self.drawn_full[reps]], axis=0)
        return len(reps)

    def _grow_loo(self, request, positions, seed, R, st, batch, advance=None):  # noqa: ANN001, ANN202
        added = 0
        for i in batch.tolist():
            st.loo[i, int(st.have[i]):R] = self.drawn_loo[i, int(st.have[i]):R]
            added += R - int(st.have[i])
        st.have[batch] = R
        return added


def _run(control: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[rep.ReplicateResult, rep.ReplicatePlan]:
    rng = np.random.default_rng(seed)
    a, delta = rng.normal(0, 1, N), rng.uniform(0.0, 2.2 * TAU, N)  # theta around tau
    e, eta = rng.normal(0, 1.0, (8, N)), rng.normal(0, rng.uniform(0.2, 1.5, N), (8, N))
    p1, q1 = 1 / (1 + np.exp(-(a + e))), 1 / (1 + np.exp(-(a - delta + e + eta)))
    full = np.stack([1 - p1, p1], axis=-1)
    loo = np.stack([1 - q1, q1], axis=-1).transpose(1, 0, 2)
    plan = rep.ReplicatePlan(min_r=4, max_r=8, control=control, threshold=TAU, bin_size=0.0, gate="raw")
    monkeypatch.setattr(rep, "proba_in", lambda model, X, classes: np.full((len(X), K), 0.5))
    monkeypatch.setattr(rep, "refit_order", lambda request, p0: (np.arange(N), "row"))
    T = SimpleNamespace(X=pd.DataFrame({"x": np.arange(N)}), y=np.array(["a", "b"] * (N // 2)))
    request = SimpleNamespace(train=T, positions=np.arange(N), classes=np.array(["a", "b"]),
                              spec=SimpleNamespace(seed=0), full_model=None, checkpoint=None, stop_on=None, jobs=1,
                              fit_s=0.0, order="row")
    return _Drawn(plan, full, loo).run(request, lambda _k: None), plan


@pytest.mark.parametrize("control", ["bh", "holm", "record"])
@pytest.mark.parametrize("seed", [0, 2, 5])
def test_decided_records_have_their_bound_on_the_decided_side(control: str, seed: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    res, plan = _run(control, seed, monkeypatch)
    d, s = res.decisions, res.stats
    assert any(v is False for v in d)  # the check is not vacuous
    for runs in (res, rep.redecided(res, plan)):  # and judged again, as mitigate does
        assert all(runs.stats.upper[i] <= TAU for i in range(N) if runs.decisions[i] is False)
        assert all(runs.stats.lower[i] >= TAU for i in range(N) if runs.decisions[i] is True)
    assert np.all(s.lower <= s.upper)
