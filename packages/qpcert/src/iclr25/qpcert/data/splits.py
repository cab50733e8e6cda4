"""The official splits.

``split_csbm``: class-balanced labelled (train) and validation nodes, the rest is test; assumes nodes are sorted by
class (class 0 first). ``split_inductive``: per class ``n_per_class`` train and ``n_per_class`` validation nodes and
ceil(fraction_test x class size) test nodes, with the official random stream ``Generator(PCG64(seed))`` (seed
None -> 0, as the official code at its current head). In the paper both train and validation nodes are labelled for
the SVM (m = n_train + n_val).
"""

from __future__ import annotations

import numpy as np

from ..config import CSBMConfig


def split_csbm(labels, n_trn_labeled: int = CSBMConfig.n_trn_labeled, n_val: int = CSBMConfig.n_val, seed: int = 0):
    """Return ``(idx_train, idx_val, idx_test)`` as the official ``split_csbm`` does."""
    y = np.asarray(labels)
    if np.any(np.diff(y) < 0):
        raise ValueError("split_csbm expects nodes sorted by class (csbm_graph(sort=True))")
    if n_trn_labeled % 2 or n_val % 2:
        raise ValueError("n_trn_labeled and n_val must be even (class-balanced two-class split)")
    rng = np.random.Generator(np.random.PCG64(seed))
    n0, n = int((y == 0).sum()), len(y)
    c0 = rng.permutation(np.arange(n0))
    c1 = rng.permutation(np.arange(n0, n))
    k, v = n_trn_labeled // 2, n_val // 2
    if k + v > min(len(c0), len(c1)):
        raise ValueError(f"a class has too few nodes for {k} train + {v} val nodes")
    idx_trn = np.concatenate((c0[:k], c1[:k]))
    idx_val = np.concatenate((c0[k : k + v], c1[k : k + v]))
    idx_test = np.concatenate((c0[k + v :], c1[k + v :]))
    return idx_trn, idx_val, idx_test


def split_inductive(labels, n_per_class: int = 20, fraction_test: float = 0.1, seed: int | None = 0, balance_test=True):
    """Return ``(idx_train, idx_unlabeled, idx_val, idx_test)`` as the official ``split_inductive`` does."""
    y = np.asarray(labels)
    if y.dtype.kind not in "iu" or y.ndim != 1 or y.size == 0 or y.min() < 0:
        raise ValueError("labels must be a non-empty 1-d array of non-negative integer class ids")
    rs = np.random.Generator(np.random.PCG64(0 if seed is None else seed))
    nc = int(y.max()) + 1
    if balance_test:
        n_test = np.ceil(fraction_test * np.bincount(y, minlength=nc))
    else:
        n_test = np.ones(nc) * n_per_class
    trn, val, test = [], [], []
    for label in range(nc):
        perm = rs.permutation((y == label).nonzero()[0])
        if len(perm) < 2 * n_per_class:
            raise ValueError(f"class {label} has {len(perm)} nodes, fewer than 2 x n_per_class = {2 * n_per_class}")
        trn.append(perm[:n_per_class])
        val.append(perm[n_per_class : 2 * n_per_class])
        test.append(perm[2 * n_per_class : 2 * n_per_class + int(n_test[label])])
    trn = rs.permutation(np.concatenate(trn))
    val = rs.permutation(np.concatenate(val))
    test = rs.permutation(np.concatenate(test))
    unlabeled = np.setdiff1d(np.arange(len(y)), np.concatenate((trn, val, test)))
    return trn, unlabeled, val, test
