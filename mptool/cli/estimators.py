"""``mptool estimators``: the short names, their engines and DTP bounds, and what --allow-import opens."""

from __future__ import annotations

from mptool.cli.app import app
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_OK

#: How --engine auto treats a name whose engine is refit (docs/randomness.md); also printed by 'mptool check'.
RANDOMNESS_TEXT = (
    "Randomness detection: where the engine is refit, mptool pdtp --engine auto first refits A(T) with another "
    "seed and with T's rows permuted. Training that depends on the seed or the row order (a forest's bootstrap, a "
    "network's initialisation and minibatches, bagged boosting, a tree's choice between equally good splits) -> "
    "the replicate engine: each record's influence beyond the randomness, decided true / false / undecided "
    "(docs/randomness.md). The same predictions -> one paired refit per record, exact. One other seed is tried: "
    "one that happens to give the same model is missed (adult-dt.yaml at seed 0; docs/init-check.md); "
    "--engine replicates forces the replicate engine. mptool mitigate judges its settings the same way."
)


@app.command()
def estimators() -> int:
    """List every short estimator name with its leave-one-out engine and DTP upper bound.

    The engine and bound are those --engine auto takes for the name with its default
    parameters and preprocess auto (found by building the pipeline, not from a fixed
    list); other parameters can change them (see 'mptool check'). Also says what a dotted
    path and --allow-import open (LightGBM, XGBoost).
    """
    from mptool.api.catalog import ALLOW_IMPORT_TEXT, catalogue

    rows = catalogue()
    out_console = ui.out_console
    w_name = max(len(r.name) for r in rows)
    w_engine = max(len(r.engine) for r in rows)
    out_console.print(f"{'name':<{w_name}}  {'engine (auto)':<{w_engine}}  DTP upper bound", soft_wrap=True)
    for r in rows:
        out_console.print(f"{r.name:<{w_name}}  {r.engine:<{w_engine}}  {r.bound}", soft_wrap=True)
        out_console.print(f"{'':<{w_name}}  {'':<{w_engine}}  class {r.path}{'; ' + r.note if r.note else ''}",
                          soft_wrap=True)
    out_console.print("")
    out_console.print(RANDOMNESS_TEXT, soft_wrap=True)
    out_console.print("")
    out_console.print(ALLOW_IMPORT_TEXT, soft_wrap=True)
    return EXIT_OK
