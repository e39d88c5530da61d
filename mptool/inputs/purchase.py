"""A purchase-style stand-in dataset (Long et al. 5.1; Shokri et al. VI-A "Purchases").

The Kaggle "acquire valued shoppers" data cannot be had offline, so this builds data of the
same shape: one record per customer, one binary feature per product category (true iff the
customer bought it in the past year), and a class label obtained, as the paper does, by
clustering the records with k-means into 10 "buying behaviours".

Generation: ``segments`` latent shopper types share a sparse baseline popularity of every
category (Beta(0.4, 6)); each type strongly prefers its own random subset of categories.
Every customer is a mixture of types (weights from a symmetric Dirichlet(``mixing``)) and
buys each category independently with the mixed probability. The latent types are
discarded; the label is the k-means cluster index (scikit-learn KMeans, k-means++
initialisation, seeded), as in the paper. Mixed customers make the clusters' borders fuzzy:
with the defaults the paper's NN (64 tanh units, 30 epochs) on 1,000 records reaches
training accuracy 1.0 and test accuracy about 0.65, as on the real data (Long et al.
Table 2: 1.0000 / 0.6434).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans

from mptool.runtime.errors import InputError


def make_purchase(
    rows: int = 5000,
    features: int = 600,
    classes: int = 10,
    segments: int = 20,
    seed: int = 0,
    mixing: float = 0.3,
) -> pd.DataFrame:
    """Binary purchase-history records with k-means class labels in column ``class``.

    Columns ``c000``, ``c001``, ... hold 0/1 purchases; ``class`` holds the cluster index
    0..classes-1.
    """
    if rows < classes or rows < 2:
        raise InputError(f"--rows must be at least --classes ({classes}) (got {rows})")
    if features < 2:
        raise InputError(f"--features must be at least 2 (got {features})")
    if classes < 2:
        raise InputError(f"--classes must be at least 2 (got {classes})")
    if segments < 1:
        raise InputError(f"--segments must be at least 1 (got {segments})")
    if mixing <= 0:
        raise InputError(f"--mixing must be positive (got {mixing})")
    rng = np.random.default_rng(seed)
    base = rng.beta(0.4, 6.0, size=features)
    prefs = np.tile(base, (segments, 1))
    for s in range(segments):
        liked = rng.choice(features, size=max(1, features // 10), replace=False)
        prefs[s, liked] = np.clip(prefs[s, liked] + rng.uniform(0.3, 0.7, size=liked.size), 0, 0.95)
    weights = rng.dirichlet(np.full(segments, mixing), size=rows)
    X = (rng.random((rows, features)) < weights @ prefs).astype(np.int8)
    labels = KMeans(n_clusters=classes, n_init=10, random_state=seed).fit_predict(X.astype(float))
    width = len(str(features - 1))
    frame = pd.DataFrame(X, columns=[f"c{j:0{width}d}" for j in range(features)])
    frame["class"] = labels.astype(np.int64)
    return frame
