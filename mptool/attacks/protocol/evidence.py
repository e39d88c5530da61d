"""Phase 4, gather evidence (Long et al. 5.3-5.4; Shokri et al. V-B): the shadow models the chosen
attacks learn from -- one shared pool, general shadows, or per-target in/out pairs."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mptool.attacks.protocol.draw import Draw
from mptool.attacks.protocol.planning import run_needs
from mptool.attacks.protocol.state import Run
from mptool.attacks.shadows import ShadowPairs, ShadowPool, train_pairs, train_pool


@dataclass(frozen=True)
class Evidence:
    """Phase 3: shadow models (Long et al. 5.3; Shokri et al. V-B) the attacks learn from."""

    pool: ShadowPool | None  # --shadow-pool: shared in/out source for every attack
    general: ShadowPool | None  # shadows of the untargeted and threshold attacks
    pairs: list[ShadowPairs] | None  # per-target in/out pairs per iteration (the paper's targeted attacks)
    tpos: np.ndarray

    def for_target(self, i: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """In and out shadow prediction vectors on target ``t`` for iteration ``i``."""
        if self.pool is not None:
            return self.pool.evidence(int(self.tpos[t]))
        assert self.pairs is not None
        return self.pairs[i].in_preds[t], self.pairs[i].out_preds[t]

    def raw_for_target(self, i: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`for_target`, unbinned (the auditor's own shadow models)."""
        if self.pool is not None:
            return self.pool.raw_evidence(int(self.tpos[t]))
        assert self.pairs is not None and self.pairs[i].in_raw is not None and self.pairs[i].out_raw is not None
        return self.pairs[i].in_raw[t], self.pairs[i].out_raw[t]

    def iterations_used(self, iterations: int) -> list[int]:
        """Iterations with their own evidence: one shared pool, or fresh pairs per iteration."""
        return [0] if self.pool is not None else list(range(iterations))


def gather_evidence(run: Run, draw: Draw) -> Evidence:
    """Train the shadow models the chosen attacks need (Long et al. 5.3 and 5.4).

    With --shadow-pool K: K models on random halves of D serve every attack. Otherwise the
    untargeted (population data) and threshold attacks get ``shadows`` general models, and
    the targeted attacks and LiRA get ``pairs`` fresh in/out pairs per target per iteration.
    """
    o, D = run.options, draw.D
    needs = run_needs(run, None)
    need_evidence, need_general = needs.evidence, needs.general
    common = (run.prep.template, D.X, D.y, draw.classes)
    pool = general = pairs = None
    t0 = time.perf_counter()
    if o.shadow_pool:
        with run.progress(o.shadow_pool, "shadow pool") as advance:
            pool = train_pool(*common, o.shadow_pool, draw.n_half, run.seed, run.bin_size, run.jobs, o.backend, advance)
        run.fits["shadow_pool"] = o.shadow_pool
        general = pool  # every target is in and out of some pool model: checked by plan_work
    else:
        if need_general:
            with run.progress(o.shadows, "shadow models") as advance:
                general = train_pool(
                    *common, o.shadows, draw.n_half, run.seed, run.bin_size, run.jobs, o.backend, advance
                )
            run.fits["shadow_general"] = o.shadows
        if need_evidence:
            with run.progress(o.iterations * o.targets, f"shadow pairs ({2 * o.pairs} per target)") as advance:
                pairs = train_pairs(
                    *common,
                    draw.tpos,
                    o.iterations,
                    o.pairs,
                    draw.n_half,
                    run.seed,
                    run.bin_size,
                    run.jobs,
                    o.backend,
                    advance,
                )
            run.fits["shadow_pairs"] = 2 * o.pairs * o.targets * o.iterations
    run.timings["shadows_s"] = time.perf_counter() - t0
    return Evidence(pool, general, pairs, draw.tpos)
