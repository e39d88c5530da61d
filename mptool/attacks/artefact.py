"""The shipped model as the attack's target (``mptool attack --trained``).

The protocol of Long et al. 5.4 attacks models it trains itself on halves of D. With
``--trained`` the published artefact, checked to be A(T) of the spec, is attacked too: its
members are the records of T, its non-members as many records drawn (seeded) from the
usable rows outside T. The attack is Yeom et al.'s loss threshold (section 3, Adversary 1):
"member" when the artefact's loss -ln p(y|x) (binned probabilities) is at most its average
training loss, which this adversary is assumed to know.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mptool.attacks.metrics import binary_metrics
from mptool.attacks.shadows import rng_for
from mptool.attacks.threshold import cross_entropy
from mptool.inputs.models import proba_in
from mptool.inputs.prepare import Prepared
from mptool.privacy.calibration import bin_probabilities

#: Seed tag of the non-member draw.
TAG_ARTEFACT = 7


def attack_artefact(prep: Prepared, bin_size: float) -> dict[str, Any] | None:
    """Loss-threshold attack on the --trained artefact: T as members, as many non-members from outside T.

    None when there is no --trained model; a dict with a ``note`` and no metrics when every
    usable row is in T (no non-member to test).
    """
    if prep.trained is None:
        return None
    T, pop = prep.train, prep.population
    outside = np.flatnonzero(~np.isin(pop.rows, T.rows))
    if outside.size == 0:
        return {"note": "every usable row is in T: no non-member to attack the artefact with; set data.train_size"}
    k = min(T.n, outside.size)
    pick = np.sort(rng_for(prep.spec.seed, TAG_ARTEFACT).choice(outside, size=k, replace=False))
    others = pop.take(pick)
    pos = {c: i for i, c in enumerate(prep.classes.tolist())}
    known = np.array([v in pos for v in others.y.tolist()])
    others = others.take(np.flatnonzero(known))  # a class T lacks: the artefact cannot score it
    p_in = bin_probabilities(prep.trained["probabilities"], bin_size)
    p_out = bin_probabilities(proba_in(prep.trained["model"], others.X, prep.classes), bin_size)
    y_in = np.array([pos[v] for v in T.y.tolist()], dtype=np.int64)
    y_out = np.array([pos[v] for v in others.y.tolist()], dtype=np.int64)
    loss = np.concatenate([cross_entropy(p_in, y_in), cross_entropy(p_out, y_out)])
    member = np.concatenate([np.ones(T.n, dtype=bool), np.zeros(others.n, dtype=bool)])
    tau = float(loss[member].mean())
    metrics = binary_metrics(member, loss <= tau + 1e-12, tau - loss)
    return {
        "attack": "threshold (Yeom et al., Adversary 1): member iff the artefact's loss <= its mean training loss",
        "path": prep.trained["path"],
        "model_hmac": prep.trained["model_hmac"],
        "members": int(T.n),
        "non_members": int(others.n),
        "tau": tau,
        **metrics,
    }


def artefact_gates(result: dict[str, Any], max_accuracy: float | None, max_auc: float | None) -> list[str]:
    """The --max-accuracy / --max-auc gates applied to the artefact's attack: one line per gate exceeded."""
    out = []
    acc, auc = result.get("accuracy"), result.get("auc")
    if max_accuracy is not None and acc is not None and acc > max_accuracy:
        out.append(f"artefact threshold accuracy {acc:.4f} > {max_accuracy}")
    if max_auc is not None and auc is not None and auc > max_auc:
        out.append(f"artefact threshold AUC {auc:.4f} > {max_auc}")
    return out
