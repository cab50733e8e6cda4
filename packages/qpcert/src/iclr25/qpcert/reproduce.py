"""Reproduction recipe for the paper's real-data setting: Cora-MLb / Citeseerb (the two largest classes of your own
``.npz`` copy), the official split, the official per-architecture C and the official budget grid.

Official protocol (``exp_labelcert_collective.py`` with ``config/label_certification_collective/{coramlb,
citeseerb}.yaml``): features binarised (x > 0), adjacency symmetrised, the two largest classes kept (largest -> 1),
isolated nodes dropped; ``split_inductive(n_per_class=5, seed)`` (5 train + 5 validation nodes per class, all m = 20
labelled); test nodes = unlabelled + test nodes, of which ``n_test = 50`` are drawn by
``Generator(PCG64(seed)).choice(.., 50, replace=False)``; NTK with the official covariance clamp; certified ratio per
budget delta (k = int(delta m)), seeds 0-4. We add the certified accuracy (correct AND certified) and the
sample-wise certificate on the same nodes (or on every test node with ``samplewise_nodes="all"``). With m = 20 every
budget is certified exactly by one enumeration of 2^19 labelings (minutes on a CPU).
"""

from __future__ import annotations

import time

import numpy as np

from .certify import certify_curve
from .data import Graph, binary_subset, load_citation_npz, split_inductive
from .ntk import ntk_matrix

OFFICIAL_DELTAS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 1.0)  # collective configs, real data
OFFICIAL_N_PER_CLASS = 5  # real-data configs: split_inductive(n_per_class=5) -> m = 20 labelled nodes
OFFICIAL_N_TEST = 50  # real-data collective configs: certificate_params.n_test

# (C, ntk_matrix keyword arguments) per model, from config/label_certification_collective/<dataset>.yaml.
# Cora-MLb's APPNP config uses alpha = 0 (no teleport), outside our APPNP's (0, 1] range: not listed.
OFFICIAL_MODELS: dict[str, dict[str, tuple[float, dict]]] = {
    "cora_ml": {  # coramlb.yaml
        "GCN": (0.075, dict(arch="gcn")),
        "SGC": (0.075, dict(arch="sgc")),
        "MLP": (0.025, dict(arch="mlp")),
        "GIN": (0.025, dict(arch="gin")),
        "GraphSAGE": (0.0075, dict(arch="sage")),
        "GCN skip-alpha": (0.1, dict(arch="gcn", skip="alpha", skip_alpha=0.1)),
        "GCN skip-PC": (0.075, dict(arch="gcn", skip="pc")),
        "GCN sym": (0.075, dict(arch="gcn", normalization="sym")),
        "SGC sym": (0.05, dict(arch="sgc", normalization="sym")),
    },
    "citeseer": {  # citeseerb.yaml
        "GCN": (0.75, dict(arch="gcn")),
        "SGC": (2.5, dict(arch="sgc")),
        "MLP": (0.025, dict(arch="mlp")),
        "APPNP": (0.5, dict(arch="appnp", appnp_alpha=0.2)),
        "GIN": (0.005, dict(arch="gin")),
        "GraphSAGE": (0.025, dict(arch="sage")),
        "GCN skip-alpha": (0.25, dict(arch="gcn", skip="alpha", skip_alpha=0.3)),
        "GCN skip-PC": (0.075, dict(arch="gcn", skip="pc")),
        "GCN sym": (0.1, dict(arch="gcn", normalization="sym")),
        "SGC sym": (1.0, dict(arch="sgc", normalization="sym")),
    },
}
DATASETS = tuple(OFFICIAL_MODELS)


def load_official_binary(path) -> Graph:
    """Cora-MLb / Citeseerb as the official loader builds them from the ``.npz``: binary features, symmetric
    unweighted adjacency (no largest-component step), the two largest classes (largest -> 1), isolated nodes dropped."""
    g = load_citation_npz(path, make_undirected=True, largest_component=False)
    if np.unique(g.labels).size < 2:
        raise ValueError(f"{path}: the graph needs at least two classes for a binary subset")
    g = Graph(adjacency=g.adjacency, features=(np.asarray(g.features) > 0).astype(np.float64), labels=g.labels)
    return binary_subset(g)


def official_split(labels, seed: int, n_per_class: int = OFFICIAL_N_PER_CLASS, n_test: int | None = OFFICIAL_N_TEST):
    """``(labelled, test, certified)`` node ids: labelled = train + validation, test = unlabelled + test nodes,
    certified = ``n_test`` of them drawn with the experiment's ``Generator(PCG64(seed))`` (all if None)."""
    trn, unl, val, test = split_inductive(labels, n_per_class=n_per_class, seed=seed)
    labelled = np.concatenate([trn, val])
    test = np.concatenate([unl, test])
    if n_test is None or n_test >= len(test):
        return labelled, test, test
    if n_test < 1:
        raise ValueError(f"n_test must be >= 1 or None (all test nodes), got {n_test}")
    return labelled, test, np.random.Generator(np.random.PCG64(seed)).choice(test, n_test, replace=False)


def reproduce_citation(
    path,
    dataset: str = "cora_ml",
    models=None,
    seeds=(0, 1, 2, 3, 4),
    deltas=OFFICIAL_DELTAS,
    n_per_class: int = OFFICIAL_N_PER_CLASS,
    n_test: int | None = OFFICIAL_N_TEST,
    samplewise_nodes: str = "certified",
    enum_limit: int = 2**20,
    time_limit: float | None = 60.0,
    backend: str = "auto",
    log=None,
) -> list[dict]:
    """Run the official real-data protocol on the ``.npz`` at ``path``; one record per (model, seed) with the
    certified ratio and certified accuracy per budget, collective and sample-wise (see module doc)."""
    if dataset not in OFFICIAL_MODELS:
        raise ValueError(f"unknown dataset {dataset!r}: expected one of {DATASETS} (sets the official C per model)")
    table = OFFICIAL_MODELS[dataset]
    models = list(table) if models is None else list(models)
    bad = [m for m in models if m not in table]
    if bad:
        raise ValueError(f"unknown model(s) {bad} for {dataset}: expected some of {list(table)}")
    if samplewise_nodes not in ("certified", "all"):
        raise ValueError(f"samplewise_nodes must be 'certified' or 'all', got {samplewise_nodes!r}")
    deltas = [float(d) for d in deltas]
    if not deltas or any(not 0.0 <= d <= 1.0 for d in deltas):
        raise ValueError(f"deltas must be fractions in [0, 1], got {deltas}")
    graph = load_official_binary(path)
    records = []
    for name in models:
        c, arch = table[name]
        q = ntk_matrix(graph.adjacency, graph.features, official_compat=True, **arch)
        for seed in seeds:
            t0 = time.perf_counter()
            labelled, test, cert = official_split(graph.labels, int(seed), n_per_class, n_test)
            sw_nodes = test if samplewise_nodes == "all" else cert
            curve = certify_curve(q, graph.labels, labelled, sw_nodes, budget_fractions=deltas, C=c,
                                  collective_idx=None if sw_nodes is cert else cert, time_limit=time_limit,
                                  enum_limit=enum_limit, backend=backend)  # fmt: skip
            rec = {"dataset": dataset, "model": name, "C": c, "seed": int(seed), "m": len(labelled),
                   "n_certified_nodes": len(cert), "n_samplewise_nodes": len(sw_nodes), "deltas": deltas,
                   "seconds": time.perf_counter() - t0,
                   **{k: curve[k] for k in ("budgets", "method", "collective", "collective_accuracy",
                                            "collective_exact", "samplewise", "samplewise_accuracy",
                                            "clean_accuracy", "collective_clean_accuracy")}}  # fmt: skip
            records.append(rec)
            if log is not None:
                log(f"{dataset} {name} seed {seed}: {curve['method']}, {rec['seconds']:.1f} s")
    return records


def summary_rows(records: list[dict]) -> list[dict]:
    """Mean (and std over seeds) per model and budget: collective / sample-wise certified ratio and accuracy."""
    rows = []
    for name in dict.fromkeys(r["model"] for r in records):
        group = [r for r in records if r["model"] == name]
        for i, d in enumerate(group[0]["deltas"]):
            row = {"model": name, "C": f"{group[0]['C']:g}", "delta": f"{d:g}", "k": str(group[0]["budgets"][i])}
            for key, label in (("collective", "coll. ratio"), ("collective_accuracy", "coll. cert. acc"),
                               ("samplewise", "s-w ratio"), ("samplewise_accuracy", "s-w cert. acc")):  # fmt: skip
                vals = np.array([r[key][i] for r in group], dtype=float)
                row[label] = f"{vals.mean():.3f}" + (f" ± {vals.std():.3f}" if len(vals) > 1 else "")
            row["exact"] = "yes" if all(r["collective_exact"][i] for r in group) else "bound"
            rows.append(row)
    return rows
