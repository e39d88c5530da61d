"""mptool: membership-privacy audits of machine-learning classifiers.

The metrics follow Long, Bindschaedler & Gunter, *Towards Measuring Membership Privacy*
(pointwise differential training privacy, PDTP; DTP-1).

The public Python API (:mod:`mptool.api.operations`), loaded on first use so that
``import mptool`` stays light::

    import mptool
    result = mptool.pdtp("data.csv", "spec.yaml")      # or a DataFrame and a dict
    result.verdict, result.summary["max"], result.table
    mptool.attack(...), mptool.reduce_dtp(...)
    mptool.mitigate(...)   # defences scored on PDTP and utility (mptool.api.mitigate)
"""

from __future__ import annotations

from typing import Any

from mptool.runtime.version import __version__

_API = ("pdtp", "attack", "reduce_dtp", "PdtpResult", "AttackResult", "ReduceResult", "as_spec")
_MITIGATE = ("mitigate", "MitigateResult")
__all__ = ["__version__", *_API, *_MITIGATE]


def __getattr__(name: str) -> Any:
    """Load the API lazily: ``mptool.pdtp`` etc. come from :mod:`mptool.api.operations`."""
    if name in _API:
        from mptool.api import operations

        return getattr(operations, name)
    if name in _MITIGATE:
        from mptool.api import mitigate

        return getattr(mitigate, name)
    raise AttributeError(f"module 'mptool' has no attribute {name!r}")
