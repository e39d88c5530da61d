"""Benchmark: can logistic-regression leave-one-out skip its pass over T? (issue 28 item 3, route (b)).

The exact engine certifies each A(T\\{t}) with at least one exact gradient of T\\{t}'s objective,
a pass over T (O(n D) per record, O(n^2 D) in all). Route (b) of the issue replaces it by a
pass-free update from A(T)'s optimum theta (Sherman-Morrison/Woodbury with H_t = H - w_t x_t x_t^T
+ penalty change) and a certified error bound, refining only records it cannot certify. This
script measures, on ``--sample`` records spread evenly over the config adult-lr's T (``--records``;
``all`` = 45,222), with the exact optima Delta* = theta_{-t} - theta from the engine:

1. the one-step update's logit error |x_t . (Delta_1 - Delta*)|;
2. the error left by the exact root of the second-order model (gradient of T\\{t}'s objective
   expanded to second order around theta with the third-derivative tensor T3 = sum_i s''_i x_i^(x)3,
   D^3 per record): x_t^T H_t^-1 sum_{i != t} rho_i x_i, rho_i the third-order remainder of the
   logistic at x_i . Delta* (first order in rho);
3. the best certificate of that model: with |s'''| <= s' and s'(z + d) <= s'(z) e^|d|,
   ||sum rho_i x_i||_{H_t^-1} <= M^2 e^M / 6 ||Delta||_{H_t} (Cauchy-Schwarz, M = max_i |x_i . Delta|), so
   |logit error| <= ||x_t||_{H_t^-1} e^M M^2 e^M / 6 ||Delta||_{H_t}; with M exact (which itself needs
   a pass) and with the pass-free bound over the one-hot blocks (sum of half-ranges per block);
4. the time of one exact pass for a batch against one T3 contraction for the same batch (same run),
   and the projected CPU of the route against today's (passes per record from the engine's own run).

PDTP is a log-ratio whose slope in the logit is at most 1, so "raw PDTP within 1e-9" needs a logit
error <= 1e-9. Prints CPU and wall time and the load.

Usage: python benchmarks/bench_lr_certify.py [--records all] [--sample 200]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one BLAS thread, as the engine uses
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from scipy.special import expit  # noqa: E402

from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import parse_spec  # noqa: E402
from mptool.loo import LooRequest, linear, newton  # noqa: E402


def quantiles(v: np.ndarray) -> str:
    q = np.quantile(v, [0.1, 0.5, 0.9, 0.99])
    return f"p10 {q[0]:.1e}, median {q[1]:.1e}, p90 {q[2]:.1e}, p99 {q[3]:.1e}"


def onehot_blocks(X: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous column ranges in which every row has exactly one 1 (the one-hot blocks)."""
    blocks, start = [], 0
    for end in range(1, X.shape[1] + 1):
        part = X[:, start:end]
        if np.isin(part, (0.0, 1.0)).all() and (part.sum(axis=1) == 1).all():
            blocks.append((start, end))
            start = end
    return blocks


def block_bound(X: np.ndarray, blocks: list[tuple[int, int]], Delta: np.ndarray) -> np.ndarray:
    """max_i |x_i . Delta| <= sum over one-hot blocks of the half-range of Delta on the block + the rest (O(D))."""
    rest = np.ones(X.shape[1], dtype=bool)
    off = np.zeros(len(Delta))
    tot = np.zeros(len(Delta))
    for a, b in blocks:
        hi, lo = Delta[:, a:b].max(axis=1), Delta[:, a:b].min(axis=1)
        tot += (hi - lo) / 2
        off += (hi + lo) / 2  # each row has one 1 in the block: the mid-range moves to a constant
        rest[a:b] = False
    const = np.all(X == 1.0, axis=0) & rest
    big = np.abs(X[:, rest & ~const]).max(axis=0)
    tot += np.abs(Delta[:, rest & ~const]) @ big
    return tot + np.abs(Delta[:, const].sum(axis=1) + off)


def adult_lr(records: str) -> linear._Setup:
    """The config adult-lr's T (``records`` rows, ``all`` = 45,222) with A(T)'s exact optimum."""
    raw = yaml.safe_load(config("adult-lr.yaml").read_text())
    raw["data"]["train_size"] = None if records == "all" else int(records)
    prep = prepare(ADULT_CSV, parse_spec(raw))
    full = fit_checked(prep.template, prep.train)
    req = LooRequest(prep.spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)
    st = linear._setup(req)
    assert st.opt.prob.m == 1 and st.opt.prob.intercept, "the adult-lr config: binary with intercept"
    return st


def counted_optima(
    st: linear._Setup, sample: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, float]:
    """For ``sample`` records spread evenly over T: positions, penalties, shifts, the engine's
    exact Delta* = theta_{-t} - theta (b, D), its gradient passes per record and its CPU seconds."""
    pos = np.linspace(0, len(st.opt.prob.X) - 1, sample).astype(np.int64)
    pen_t, shift = linear._penalty_shift(st, pos)
    passes: list[int] = []
    real = newton.loo_gradient

    def counting(o, U, p, pt, sh, work=None):  # type: ignore[no-untyped-def]
        passes.append(len(p))
        return real(o, U, p, pt, sh, work)

    newton.loo_gradient = counting
    c = time.process_time()
    try:
        U = newton.loo_optima(st.opt, pos, pen_t, shift)
    finally:
        newton.loo_gradient = real
    return pos, pen_t, shift, U[:, 0, :] - st.opt.U[0], sum(passes) / len(pos), time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="all")
    ap.add_argument("--sample", type=int, default=200)
    args = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    st = adult_lr(args.records)
    opt, prob = st.opt, st.opt.prob
    X, y, theta = prob.X, prob.y, opt.U[0]
    n, D = X.shape
    pos, pen_t, shift, Dstar, today, engine_cpu = counted_optima(st, args.sample)
    real = newton.loo_gradient

    init = newton.InitialInverse.build(opt, pos, pen_t, shift)
    own, _ = newton._own_terms(opt, np.broadcast_to(opt.U, (len(pos), 1, D)), X[pos], y[pos])
    G0 = opt.G[None] - own[:, :, None] * X[pos][:, None, :] + (pen_t - prob.pen)[:, None, :] * opt.U
    D1 = -init.apply(G0.reshape(len(pos), D), np.arange(len(pos)))
    xt = X[pos]
    err1 = np.abs(np.einsum("bd,bd->b", xt, D1 - Dstar))

    z = X @ theta
    s0, s1 = expit(z), expit(z) * expit(-z)
    s2 = s1 * (1 - 2 * s0)
    delta = X @ Dstar.T  # (n, b), exact
    rho = expit(z[:, None] + delta) - s0[:, None] - s1[:, None] * delta - 0.5 * s2[:, None] * delta**2
    rho[pos, np.arange(len(pos))] = 0.0  # t's own term is exact in the model
    r = rho.T @ X  # (b, D)
    err2 = np.abs(np.einsum("bd,bd->b", xt, init.apply(r, np.arange(len(pos)))))

    Ht_x = init.apply(xt, np.arange(len(pos)))
    nx = np.sqrt(np.einsum("bd,bd->b", xt, Ht_x))  # ||x_t||_{H_t^-1}
    H = np.linalg.inv(opt.Hinv)
    HD = Dstar @ H
    quad = np.einsum("bd,bd->b", Dstar, HD) - s1[pos] * np.einsum("bd,bd->b", xt, Dstar) ** 2
    nD = np.sqrt(np.maximum(quad + ((pen_t - prob.pen) * Dstar**2).sum(axis=1), 0))  # ||Delta*||_{H_t}
    delta[pos, np.arange(len(pos))] = 0.0
    M_exact = np.abs(delta).max(axis=0)
    M_block = block_bound(X, onehot_blocks(X), Dstar)
    lev = np.sqrt(np.einsum("ij,jk,ik->i", X, opt.Hinv, X)).max()
    M_lev = lev * nD / np.sqrt(1 - (s1[pos] * nx**2).clip(max=0.99))

    def cert(M: np.ndarray) -> np.ndarray:
        return nx * np.exp(2 * M) * M**2 / 6 * nD

    print(f"T: {n} records, D = {D}; sample of {len(pos)} records; the engine's passes per record: "
          f"{today:.2f} ({engine_cpu:.2f} CPU s)")
    print(f"one-step update, logit error: {quantiles(err1)}; <= 1e-9 for {np.mean(err1 <= 1e-9):.1%}")
    print(f"second-order model (T3), logit error: {quantiles(err2)}; <= 1e-9 for {np.mean(err2 <= 1e-9):.1%}")
    f = {}
    for name, M in (("M exact (needs a pass)", M_exact), ("M by one-hot blocks (O(D))", M_block),
                    ("M by the largest leverage", M_lev)):
        b = cert(M)
        f[name] = float(np.mean(b <= 1e-9))
        print(f"certificate with {name}: {quantiles(b)}; <= 1e-9 for {f[name]:.1%} (M/true M: median "
              f"{np.median(M / M_exact):.2f})")

    b = 88  # the engine's batch at n = 45,222
    V = np.random.default_rng(0).standard_normal((b, 1, D)) * 1e-3 + opt.U
    T3 = np.random.default_rng(1).standard_normal((D * D, D))
    tp, tc = [], []
    for _ in range(3):
        c = time.process_time()
        real(opt, V, pos[:b] if len(pos) >= b else np.resize(pos, b), np.resize(pen_t, (b, D)), np.zeros((b, D)))
        tp.append(time.process_time() - c)
        c = time.process_time()
        W = np.einsum("bi,bj->bij", V[:, 0], V[:, 0]).reshape(b, D * D)
        W @ T3
        tc.append(time.process_time() - c)
    pass_s, con_s = min(tp), min(tc)
    best = f["M by one-hot blocks (O(D))"]
    route = 2 * con_s / pass_s + (1 - best) * 1.0
    print(f"one pass for {b} records {pass_s:.3f} CPU s, one T3 contraction {con_s:.4f} CPU s "
          f"({con_s / pass_s:.2f} passes); the route (two contractions, one pass for each record not certified) "
          f"~{route:.2f} passes per record vs today's {today:.2f}: ~{today / route:.1f}x at best")
    print(f"total {time.process_time() - c0:.1f} CPU s, {time.perf_counter() - w0:.1f} s wall, "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
