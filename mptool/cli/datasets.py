"""``mptool datasets``: builders of experiment data (the purchase-style stand-in)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mptool.cli.app import (
    app,
)
from mptool.inputs.options import check_purchase_flags
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_OK, InputError

datasets_app = typer.Typer(help="Build datasets for experiments (the purchase-style stand-in).", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@datasets_app.command("make-purchase")
def make_purchase_cmd(
    out: Annotated[Path, typer.Option(help="CSV file to write (.gz compresses).")] = Path("purchase.csv.gz"),
    rows: Annotated[int, typer.Option(help="Customers (records).")] = 5000,
    features: Annotated[int, typer.Option(help="Binary product-category columns.")] = 600,
    classes: Annotated[int, typer.Option(help="k-means clusters = class labels (the paper: 10).")] = 10,
    segments: Annotated[int, typer.Option(help="Latent shopper types the purchases are drawn from.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the generator and of k-means.")] = 0,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> int:
    """Purchase-style data: binary purchase columns and k-means cluster labels.

    The stand-in for the Kaggle purchase data of Long et al. section 5.1. Writes columns
    c000.. (0/1) and 'class' (cluster index). Use it with a spec whose data.label is
    'class', e.g. estimator mlp with max_iter 30 (the paper's purchase NN).
    """
    from mptool.inputs.purchase import make_purchase
    from mptool.outputs.results import write_atomic

    check_purchase_flags(rows=rows, features=features, classes=classes, segments=segments, seed=seed)
    if out.exists() and not force:
        raise InputError(f"{out}: exists; pass --force to overwrite or choose another --out")
    if not out.parent.is_dir():
        raise InputError(f"{out}: the folder does not exist")
    frame = make_purchase(rows, features, classes, segments, seed)
    text = frame.to_csv(index=False, lineterminator="\n")
    if out.suffix == ".gz":
        import gzip

        write_atomic(out, gzip.compress(text.encode(), mtime=0))
    else:
        write_atomic(out, text)
    counts = frame["class"].value_counts().sort_index().tolist()
    ui.echo(f"wrote {out}: {rows} records, {features} binary features, classes (k-means) sizes {counts}")
    return EXIT_OK
