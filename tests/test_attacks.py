"""Unit tests of the attack functions, each against a naive re-computation written here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mptool.attacks import leakage, lira, targeted, threshold
from mptool.attacks.protocol import binary_metrics, correlations, downsample_roc, parse_attacks
from mptool.attacks.shadows import parse_source, synthesize, train_pool
from mptool.attacks.untargeted import FeatureEncoder, train_untargeted
from mptool.inputs.data import Column, Schema
from mptool.inputs.models import fit
from mptool.runtime.errors import InputError


def _vec(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    p = rng.dirichlet(np.ones(k), size=n)
    return (np.floor(p / 0.01) * 0.01 + 0.005).clip(0.005, 0.995)


def test_distance_matches_naive_kl() -> None:
    rng = np.random.default_rng(1)
    q, ins, outs = _vec(rng, 4, 3), _vec(rng, 5, 3), _vec(rng, 5, 3)
    score, decision = targeted.distance(q, ins, outs)
    p_in = [sum(r[i] for r in ins) / 5 for i in range(3)]
    p_out = [sum(r[i] for r in outs) / 5 for i in range(3)]
    for row in range(4):
        kl_in = sum(q[row, i] * math.log(q[row, i] / p_in[i]) for i in range(3))
        kl_out = sum(q[row, i] * math.log(q[row, i] / p_out[i]) for i in range(3))
        assert score[row] == pytest.approx(kl_out - kl_in)
        assert decision[row] == (kl_out > kl_in)


def test_distance_tie_is_out() -> None:
    same = np.array([[0.305, 0.695]] * 3)
    score, decision = targeted.distance(same[:1], same, same)
    assert score[0] == 0 and not decision[0]


def test_frequency_matches_naive_counts() -> None:
    ins = np.array([[0.995, 0.005], [0.995, 0.005], [0.805, 0.195]])
    outs = np.array([[0.805, 0.195], [0.705, 0.295], [0.995, 0.005], [0.805, 0.195]])
    q = np.array([[0.995, 0.005], [0.805, 0.195], [0.505, 0.495]])
    score, decision = targeted.frequency(q, ins, outs)
    for row in range(3):
        total = 0.0
        for i in range(2):
            o_in = sum(1 for r in ins if abs(r[i] - q[row, i]) < 1e-9)
            o_out = sum(1 for r in outs if abs(r[i] - q[row, i]) < 1e-9)
            if o_in + o_out == 0:
                continue
            total += math.log((o_in + 0.5) / (3 + 1)) - math.log((o_out + 0.5) / (4 + 1))
        assert score[row] == pytest.approx(total)
    assert decision.tolist() == [True, False, False]


def test_threshold_uses_shadow_training_loss() -> None:
    preds = np.array([[[0.905, 0.095], [0.305, 0.695]], [[0.605, 0.395], [0.205, 0.795]]])
    members = np.array([[True, False], [False, True]])
    y = np.array([0, 1])
    tau = threshold.expected_training_loss(preds, members, y)
    assert tau == pytest.approx((-math.log(0.905) - math.log(0.795)) / 2)
    score, decision = threshold.threshold(np.array([[0.995, 0.005], [0.505, 0.495]]), 0, tau)
    assert decision.tolist() == [True, False]
    assert score[0] == pytest.approx(tau + math.log(0.995))


def _normal_logpdf(x: float, mu: float, sd: float) -> float:
    return -0.5 * ((x - mu) / sd) ** 2 - math.log(sd * math.sqrt(2 * math.pi))


def test_lira_online_and_offline_match_gaussian_formulas() -> None:
    rng = np.random.default_rng(3)
    ins, outs = _vec(rng, 20, 2), _vec(rng, 20, 2)
    q = _vec(rng, 3, 2)
    phi = lambda p: math.log(p / (1 - p))  # noqa: E731
    phi_in = np.array([phi(r[1]) for r in ins])
    phi_out = np.array([phi(r[1]) for r in outs])
    assert np.allclose(lira.logit_confidence(ins, 1), phi_in)
    obs = lira.logit_confidence(q, 1)
    score, _ = lira.lira_online(obs, phi_in, phi_out, None, None)
    mi, si = phi_in.mean(), math.sqrt(((phi_in - phi_in.mean()) ** 2).mean())
    mo, so = phi_out.mean(), math.sqrt(((phi_out - phi_out.mean()) ** 2).mean())
    for r in range(3):
        assert score[r] == pytest.approx(_normal_logpdf(obs[r], mi, si) - _normal_logpdf(obs[r], mo, so))
    off, off_d = lira.lira_offline(obs, phi_out, None)
    for r in range(3):
        assert off[r] == pytest.approx(0.5 * (1 + math.erf((obs[r] - mo) / (so * math.sqrt(2)))))
        assert off_d[r] == (obs[r] > mo)


def test_pooled_std_is_within_group_spread() -> None:
    groups = [np.array([1.0, 3.0]), np.array([10.0, 10.0, 16.0, 16.0])]
    assert lira.pooled_std(groups) == pytest.approx(math.sqrt((1 + 1 + 9 * 4) / 6))


def test_kl_leakage_one_dimension_closed_form() -> None:
    """rho_KL on the true-label logit: the symmetric KL of the two fitted Gaussians, no ridge (the
    earlier estimate on binned output vectors with a 1e-4 ridge was replaced, issue 18 item 7)."""
    p_in = np.array([0.8, 0.6, 0.7, 0.75, 0.9, 0.65, 0.7, 0.8])
    p_out = np.array([0.4, 0.2, 0.3, 0.1, 0.5, 0.35, 0.3, 0.45])
    ins, outs = np.column_stack([1 - p_in, p_in]), np.column_stack([1 - p_out, p_out])
    phi_in, _ = leakage.true_label_logit(ins, 1)
    phi_out, _ = leakage.true_label_logit(outs, 1)
    assert phi_in[0] == pytest.approx(math.log(0.8 / 0.2))
    m1, v1 = phi_in.mean(), phi_in.var()
    m0, v0 = phi_out.mean(), phi_out.var()

    def kl(ma: float, va: float, mb: float, vb: float) -> float:
        return 0.5 * (va / vb - 1 + (mb - ma) ** 2 / vb + math.log(vb / va))

    est = leakage.kl_leakage(phi_in, phi_out)
    assert est.value == pytest.approx(kl(m1, v1, m0, v0) + kl(m0, v0, m1, v1)) and est.reason is None
    assert leakage.kl_leakage(phi_in, phi_in).value == pytest.approx(0.0, abs=1e-9)


def test_gaussian_kl_multivariate_is_symmetric_sum_zero_for_equal() -> None:
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    assert leakage.gaussian_kl(np.zeros(2), cov, np.zeros(2), cov) == pytest.approx(0.0, abs=1e-12)
    # shift only: KL = 0.5 d^T S^-1 d
    d = np.array([1.0, -1.0])
    assert leakage.gaussian_kl(np.zeros(2), cov, d, cov) == pytest.approx(0.5 * d @ np.linalg.inv(cov) @ d)


def _naive_auc(member: np.ndarray, score: np.ndarray) -> float:
    pos, neg = score[member], score[~member]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_binary_metrics_match_naive() -> None:
    rng = np.random.default_rng(5)
    member = rng.random(300) < 0.5
    score = rng.normal(size=300) + member * 0.8
    score[:20] = np.round(score[:20])  # some ties
    decision = score > 0.3
    m = binary_metrics(member, decision, score)
    tp = sum(d and t for d, t in zip(decision, member, strict=True))
    fp = sum(d and not t for d, t in zip(decision, member, strict=True))
    tn = sum(not d and not t for d, t in zip(decision, member, strict=True))
    fn = sum(not d and t for d, t in zip(decision, member, strict=True))
    assert m["accuracy"] == pytest.approx((tp + tn) / 300)
    assert m["precision"] == pytest.approx(tp / (tp + fp))
    assert m["recall"] == pytest.approx(tp / (tp + fn))
    p, r = tp / (tp + fp), tp / (tp + fn)
    assert m["f1"] == pytest.approx(2 * p * r / (p + r))
    assert m["advantage"] == pytest.approx(tp / (tp + fn) - fp / (fp + tn))
    assert m["auc"] == pytest.approx(_naive_auc(member, score))
    # TPR at 1% FPR: the best threshold letting at most 1% of non-members through.
    neg = np.sort(score[~member])[::-1]
    allowed = int(np.floor(0.01 * len(neg)))
    best = 0.0
    for thr in np.unique(score):
        if np.sum(score[~member] >= thr) <= allowed:
            best = max(best, float(np.mean(score[member] >= thr)))
    assert m["tpr_at_1pct_fpr"] == pytest.approx(best)
    assert len(m["roc"]["fpr"]) <= 200 and m["roc"]["fpr"][0] == 0.0 and m["roc"]["tpr"][-1] == 1.0


def test_downsample_roc_keeps_ends() -> None:
    f = np.linspace(0, 1, 1000)
    a, b = downsample_roc(f, f**0.5, 200)
    assert len(a) <= 200 and a[0] == 0 and a[-1] == 1 and b[-1] == 1


def test_correlations_match_naive_pearson() -> None:
    a = np.array([0.5, 0.6, 0.9, 0.7, 1.0])
    p = np.array([0.1, 0.3, 1.5, 0.2, 2.0])
    c = correlations(a, p)
    am, pm = a.mean(), p.mean()
    r = sum((x - am) * (y - pm) for x, y in zip(a, p, strict=True)) / math.sqrt(
        sum((x - am) ** 2 for x in a) * sum((y - pm) ** 2 for y in p)
    )
    assert c["pearson"] == pytest.approx(r)
    assert c["spearman"] == pytest.approx(0.9)  # ranks 1,2,4,3,5 vs 1,3,4,2,5
    assert correlations(np.ones(5), p)["pearson"] is None


def test_parse_attacks_and_source() -> None:
    assert parse_attacks("all") == ("untargeted", "distance", "frequency", "threshold", "lira", "rmia")
    assert parse_attacks("lira, distance") == ("distance", "lira")
    with pytest.raises(InputError, match="unknown attack 'distanse'"):
        parse_attacks("distanse")
    assert parse_source("noisy:0.2") == ("noisy", 0.2)
    with pytest.raises(InputError):
        parse_source("noisy:2")


def _toy(n: int = 80, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.integers(0, 3, size=n).astype(float)})
    y = np.where(X["a"] + rng.normal(scale=0.5, size=n) > 0, "p", "n").astype(object)
    return X, y


def test_pool_membership_and_jobs_independence() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _toy()
    classes = np.array(["n", "p"], dtype=object)
    one = train_pool(LogisticRegression(), X, y, classes, 6, 40, 7, 0.01, jobs=1)
    two = train_pool(LogisticRegression(), X, y, classes, 6, 40, 7, 0.01, jobs=2, backend="threading")
    assert np.array_equal(one.members, two.members) and np.allclose(one.preds, two.preds)
    assert (one.members.sum(axis=1) == 40).all()
    k = 2
    model = fit(LogisticRegression(), X[one.members[k]], y[one.members[k]])
    expect = np.floor(model.predict_proba(X) / 0.01) * 0.01 + 0.005
    assert np.allclose(one.preds[k], expect)
    ins, outs = one.evidence(5)
    assert len(ins) == one.members[:, 5].sum() and len(ins) + len(outs) == 6


def test_synthesize_marginals_and_noisy() -> None:
    X, y = _toy()
    rng = np.random.default_rng(0)
    Xs, ys = synthesize(X, y, 200, "marginals", 0.0, rng)
    assert len(Xs) == 200 and set(ys) <= set(y)
    for lab in ("n", "p"):  # every value comes from the same column among records of that label
        assert set(Xs["a"][ys == lab]) <= set(X["a"][y == lab])
    Xn, yn = synthesize(X, y, 50, "noisy", 0.5, np.random.default_rng(1))
    assert Xn.shape == (50, 2) and set(Xn["b"]) <= set(X["b"])


def test_untargeted_learns_a_separable_membership_signal() -> None:
    schema = Schema((Column("a", "numeric"), Column("c", "categorical", categories=("x", "y"))), "label", (0, 1))
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=400), "c": rng.choice(["x", "y"], size=400)})
    enc = FeatureEncoder.fit(X, schema)
    xe = enc.transform(X)
    assert xe.shape == (400, 3) and np.allclose(xe[:, 1:].sum(axis=1), 1)
    member = rng.random(400) < 0.5
    q = np.where(member[:, None], [0.005, 0.995], [0.405, 0.595])
    yi = np.ones(400, dtype=int)
    for per_class in (False, True):
        atk = train_untargeted(xe, yi, q, member, 2, 0, per_class)
        _, decision = atk.score(xe, yi, q)
        assert np.mean(decision == member) > 0.95
