"""Membership inference attacks: shadow models and one module per attack.

Attack names used on the command line and in result files:

- ``untargeted``: Shokri et al.'s shadow-model attack (Long et al., Algorithm 1).
- ``distance``, ``frequency``: Long et al.'s targeted attacks (section 5.3).
- ``threshold``: Yeom et al.'s loss-threshold adversary.
- ``lira`` and ``lira_offline``: Carlini et al.'s likelihood-ratio attack (``--attacks lira`` runs both).
- ``attribute`` (``--attacks attribute:COLUMN``, not part of ``all``): Yeom et al.'s attribute
  inference (section 4) of a feature column; :mod:`mptool.attacks.attribute`.
- ``rmia`` and ``rmia_offline``: Zarifzadeh et al.'s relative attack (``--attacks rmia`` runs both).
- ``label_only`` and ``label_free`` (``--attacks label_only`` runs both; not part of ``all``):
  Choquette-Choo et al.'s label-only attack and its variant without the true label;
  :mod:`mptool.attacks.label_only`.
"""

from __future__ import annotations

#: Names accepted by --attacks (``all`` selects every one).
ATTACK_CHOICES = ("untargeted", "distance", "frequency", "threshold", "lira", "rmia")

#: Names accepted by --attacks that ``all`` leaves out (they refit the target models for their queries).
EXTRA_CHOICES = ("label_only",)

#: Result names each choice produces, in output order.
RESULT_NAMES = {
    "untargeted": ("untargeted",),
    "distance": ("distance",),
    "frequency": ("frequency",),
    "threshold": ("threshold",),
    "lira": ("lira", "lira_offline"),
    "rmia": ("rmia", "rmia_offline"),
    "label_only": ("label_only", "label_free"),
}

#: Attacks that need per-record in/out shadow evidence (pairs or the shared pool; rmia: the pool,
#: or without one the general shadows as its reference models).
NEEDS_EVIDENCE = frozenset({"distance", "frequency", "lira", "rmia"})

#: |D| when neither --candidates nor the spec's data.train_size sets it (Long et al. 5.4: 1,000
#: training records, so 2,000 candidates); see :func:`mptool.attacks.plan.resolve_candidates`.
DEFAULT_CANDIDATES = 2000
#: Shadow-pool size of a default run (benchmarks/bench_attack_default.py): 32 in and 32 out
#: models per target on average, shared by every iteration. 0 = the paper's per-target pairs.
DEFAULT_SHADOW_POOL = 64
