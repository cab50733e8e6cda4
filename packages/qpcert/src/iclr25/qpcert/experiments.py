"""Built-in experiments: NTK-SVM accuracy per architecture (part 1) and certified ratios vs budget (part 2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .data import csbm_graph, karate_club, split_csbm, split_inductive
from .ntk import ntk_matrix
from .svm import KernelSVM

# (label, ntk_matrix keyword arguments)
ARCH_TABLE = [
    ("MLP", dict(arch="mlp")),
    ("GCN", dict(arch="gcn")),
    ("SGC", dict(arch="sgc")),
    ("APPNP", dict(arch="appnp")),
    ("GIN", dict(arch="gin")),
    ("GraphSAGE", dict(arch="sage")),
    ("GCN skip-PC", dict(arch="gcn", skip="pc")),
    ("GCN skip-alpha", dict(arch="gcn", skip="alpha")),
    ("GCN depth 2", dict(arch="gcn", depth=2)),
    ("GCN linear", dict(arch="gcn", activation="linear")),
]


@dataclass
class Dataset:
    name: str
    adjacency: np.ndarray
    features: np.ndarray
    labels: np.ndarray  # 0/1
    idx_labeled: np.ndarray
    idx_test: np.ndarray


def csbm_dataset(seed: int = 0, n: int = 200, n_labeled: int = 40) -> Dataset:
    """Official CSBM setting: n = 200, 20 train + 20 val labelled nodes (m = 40), the rest test."""
    g = csbm_graph(n=n, seed=seed)
    trn, val, test = split_csbm(g.labels, n_trn_labeled=n_labeled // 2, n_val=n_labeled // 2, seed=seed)
    return Dataset("CSBM", g.adjacency, g.features, g.labels, np.concatenate([trn, val]), test)


def karate_dataset(seed: int = 0) -> Dataset:
    """Official karate setting: split_inductive(n_per_class=2) -> m = 8 labelled nodes, the other 26 are test."""
    g = karate_club()
    trn, _, val, _ = split_inductive(g.labels, n_per_class=2, seed=seed)
    labeled = np.concatenate([trn, val])
    test = np.setdiff1d(np.arange(g.n), labeled)
    return Dataset("Karate", g.adjacency, g.features, g.labels, labeled, test)


def signs(labels: np.ndarray) -> np.ndarray:
    return np.where(np.asarray(labels) == 1, 1.0, -1.0)


def ntk_svm_accuracy(ds: Dataset, C: float, **arch) -> tuple[float, float, torch.Tensor]:
    """Train the NTK-SVM on the labelled nodes; return (test accuracy, KKT residual, full kernel)."""
    q = ntk_matrix(ds.adjacency, ds.features, **arch)
    lab, test = ds.idx_labeled, ds.idx_test
    svm = KernelSVM(C=C).fit(q[np.ix_(lab, lab)], signs(ds.labels[lab]))
    pred = svm.predict(q[np.ix_(test, lab)])
    return float(np.mean(pred == signs(ds.labels[test]))), svm.kkt_residual_, q


def ntk_accuracy_table(cs: list[float] = (0.001, 1.0)) -> list[dict]:
    rows = []
    for ds in (csbm_dataset(), karate_dataset()):
        for label, arch in ARCH_TABLE:
            row = {"dataset": ds.name, "model": label}
            for c in cs:
                acc, kkt, _ = ntk_svm_accuracy(ds, c, **arch)
                row[f"acc C={c:g}"] = acc
                row[f"kkt C={c:g}"] = kkt
            rows.append(row)
    return rows


def format_table(rows: list[dict], floatfmt: str = "{:.3f}") -> str:
    if not rows:
        return "(empty)"
    cols = list(rows[0])
    cells = [[(floatfmt.format(r[c]) if isinstance(r[c], float) else str(r[c])) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = "| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |" for row in cells]
    return "\n".join([line, sep, *body])
