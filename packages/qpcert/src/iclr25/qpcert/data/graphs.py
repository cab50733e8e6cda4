"""Graph container, karate club (networkx), the citation-graph ``.npz`` layout (Cora-ML, Citeseer) and binary
subsets. No package ships Cora-ML/Citeseer offline: point ``load_citation_npz`` at your own copy.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from iclr25.shared import atomic_write


@dataclass
class Graph:
    adjacency: np.ndarray  # [n, n] symmetric 0/1 (dense numpy or scipy.sparse)
    features: np.ndarray  # [n, d]
    labels: np.ndarray  # [n] integer class ids

    @property
    def n(self) -> int:
        return int(self.adjacency.shape[0])


def karate_club() -> Graph:
    """Zachary's karate club as the official ``get_karate_club`` builds it: networkx's edge weights kept (the number
    of shared activities, 1-7), features X = I, labels 1 = 'Mr. Hi', 0 = 'Officer'."""
    import networkx as nx

    g = nx.karate_club_graph()
    nodes = sorted(g.nodes())
    a = nx.to_numpy_array(g, nodelist=nodes)  # weight="weight": the official code keeps the weights
    labels = np.array([1 if g.nodes[v]["club"] == "Mr. Hi" else 0 for v in nodes])
    return Graph(adjacency=a, features=np.eye(len(nodes)), labels=labels)


_KEYS = ("data", "indices", "indptr", "shape")


def _check_csr(name: str, data, indices, indptr, shape) -> None:
    """Validate CSR arrays before scipy sees them (malformed arrays otherwise fail late or inside a destructor)."""
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise ValueError(f"{name}.shape must be two non-negative integers, got {shape!r}")
    rows, cols = int(shape[0]), int(shape[1])
    for key, arr in (("indices", indices), ("indptr", indptr)):
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(f"{name}.{key} must be a 1-d integer array, got dtype {arr.dtype}, shape {arr.shape}")
    if data.ndim != 1 or data.dtype.kind not in "biuf":
        raise ValueError(f"{name}.data must be a 1-d numeric array, got dtype {data.dtype}, shape {data.shape}")
    if len(indptr) != rows + 1 or (len(indptr) and indptr[0] != 0) or np.any(np.diff(indptr) < 0):
        raise ValueError(f"{name}.indptr must be non-decreasing, start at 0 and have {rows + 1} entries")
    if len(indices) != len(data) or (len(indptr) and indptr[-1] != len(indices)):
        raise ValueError(
            f"{name}: indptr[-1], len(indices) and len(data) must agree ({indptr[-1]}, {len(indices)}, {len(data)})"
        )
    if len(indices) and (indices.min() < 0 or indices.max() >= cols):
        raise ValueError(
            f"{name}.indices out of range: column ids must lie in [0, {cols}), got [{indices.min()}, {indices.max()}]"
        )
    if not np.isfinite(data.astype(float)).all():
        raise ValueError(f"{name}.data contains NaN or inf")


def _csr(loader, name: str) -> sp.csr_matrix:
    for sep in (".", "_"):
        keys = [f"{name}{sep}{k}" for k in _KEYS]
        if all(k in loader for k in keys):
            data, indices, indptr, shape = (np.asarray(loader[k]) for k in keys)
            _check_csr(name, data, indices, indptr, shape)
            return sp.csr_matrix((data, indices, indptr), shape=tuple(int(v) for v in shape))
    if name in loader:
        return sp.csr_matrix(loader[name])
    raise ValueError(f"npz file lacks the sparse matrix {name!r} (expected keys {name}.data/.indices/.indptr/.shape)")


def load_citation_npz(path, make_undirected: bool = True, largest_component: bool = True) -> Graph:
    """Load a citation graph stored in the standard ``.npz`` layout (``adj_matrix.*``, ``attr_matrix.*``, ``labels``):
    unweighted, symmetrised, self loops removed, largest connected component kept (the official ``standardize``)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist; Cora-ML/Citeseer are not shipped, pass the path to your copy")
    try:
        raw = np.load(path, allow_pickle=True)
        if not isinstance(raw, np.lib.npyio.NpzFile):
            loader = raw
        else:
            with raw:
                loader = dict(raw)
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path} is not a readable .npz file: {err}") from err
    if not isinstance(loader, dict):
        raise ValueError(f"{path} is not a readable .npz file (it holds a single array, not named arrays)")
    adj = _csr(loader, "adj_matrix")
    if adj.shape[0] != adj.shape[1]:
        raise ValueError(f"adjacency must be square, got {adj.shape}")
    attr = _csr(loader, "attr_matrix")
    if "labels" not in loader:
        raise ValueError("npz file lacks 'labels'")
    labels = np.asarray(loader["labels"]).reshape(-1)
    if labels.dtype.kind not in "iu" and not (labels.dtype.kind == "f" and np.all(np.isfinite(labels))
                                               and np.all(labels == np.round(labels))):  # fmt: skip
        raise ValueError(f"labels must be integer class ids, got dtype {labels.dtype}")
    if labels.size and labels.min() < 0:
        raise ValueError(f"labels must be non-negative class ids, got min {labels.min()}")
    if attr.shape[0] != adj.shape[0] or labels.shape[0] != adj.shape[0]:
        raise ValueError(f"inconsistent sizes: adjacency {adj.shape}, attributes {attr.shape}, labels {labels.shape}")
    adj = (adj > 0).astype(np.float64)
    if make_undirected:
        adj = ((adj + adj.T) > 0).astype(np.float64)
    adj = adj.tolil()
    adj.setdiag(0)
    adj = adj.tocsr()
    adj.eliminate_zeros()
    keep = np.arange(adj.shape[0])
    if largest_component:
        _, comp = sp.csgraph.connected_components(adj, directed=False)
        keep = np.flatnonzero(comp == np.argmax(np.bincount(comp)))
    return Graph(adjacency=adj[keep][:, keep], features=attr[keep].toarray(), labels=labels[keep].astype(int))


def save_citation_npz(path, graph: Graph) -> None:
    """Write ``graph`` in the standard citation ``.npz`` layout (atomically)."""
    adj = sp.csr_matrix(graph.adjacency)
    attr = sp.csr_matrix(graph.features)
    arrays = {"labels": np.asarray(graph.labels)}
    for name, mat in (("adj_matrix", adj), ("attr_matrix", attr)):
        arrays.update({f"{name}.data": mat.data, f"{name}.indices": mat.indices, f"{name}.indptr": mat.indptr})
        arrays[f"{name}.shape"] = np.array(mat.shape)
    with atomic_write(path, "wb") as fh:
        np.savez(fh, **arrays)


def binary_subset(graph: Graph, classes: tuple[int, int] | None = None, drop_isolated: bool = True) -> Graph:
    """Keep two classes, relabelled 0/1 with ``classes[1]`` -> 1; optionally drop isolated nodes. Default: the two
    largest classes with the LARGEST as class 1 (the official ``_make_binary``: most common -> 1, second -> 0)."""
    y = np.asarray(graph.labels)
    if classes is None:
        counts = np.bincount(y)
        order = np.argsort(-counts, kind="stable")[:2]
        classes = (int(order[1]), int(order[0]))
    keep = np.flatnonzero(np.isin(y, classes))
    adj = sp.csr_matrix(graph.adjacency)[keep][:, keep]
    if drop_isolated:
        deg = np.asarray(adj.sum(axis=1)).reshape(-1)
        sub = np.flatnonzero(deg > 0)
        keep, adj = keep[sub], adj[sub][:, sub]
    labels = (y[keep] == classes[1]).astype(int)
    feats = graph.features[keep]
    return Graph(adjacency=adj.toarray() if not sp.issparse(graph.adjacency) else adj, features=feats, labels=labels)
