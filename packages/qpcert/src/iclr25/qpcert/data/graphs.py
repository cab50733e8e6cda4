"""Graph container, karate club (networkx), the citation-graph ``.npz`` layout (Cora-ML, Citeseer) and binary
subsets. No package ships Cora-ML/Citeseer offline: point ``load_citation_npz`` at your own copy.
"""

from __future__ import annotations

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
    """Zachary's karate club from networkx; features X = I (as the official loader); labels 0 = 'Mr. Hi', 1 = 'Officer'."""
    import networkx as nx

    g = nx.karate_club_graph()
    nodes = sorted(g.nodes())
    a = nx.to_numpy_array(g, nodelist=nodes, weight=None)
    labels = np.array([0 if g.nodes[v]["club"] == "Mr. Hi" else 1 for v in nodes])
    return Graph(adjacency=(a > 0).astype(np.int64), features=np.eye(len(nodes)), labels=labels)


_KEYS = ("data", "indices", "indptr", "shape")


def _csr(loader, name: str) -> sp.csr_matrix:
    for sep in (".", "_"):
        keys = [f"{name}{sep}{k}" for k in _KEYS]
        if all(k in loader for k in keys):
            data, indices, indptr, shape = (loader[k] for k in keys)
            return sp.csr_matrix((data, indices, indptr), shape=tuple(shape))
    if name in loader:
        return sp.csr_matrix(loader[name])
    raise ValueError(f"npz file lacks the sparse matrix {name!r} (expected keys {name}.data/.indices/.indptr/.shape)")


def load_citation_npz(path, make_undirected: bool = True, largest_component: bool = True) -> Graph:
    """Load a citation graph stored in the standard ``.npz`` layout (``adj_matrix.*``, ``attr_matrix.*``, ``labels``):
    unweighted, symmetrised, self loops removed, largest connected component kept (the official ``standardize``)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist; Cora-ML/Citeseer are not shipped, pass the path to your copy")
    with np.load(path, allow_pickle=True) as raw:
        loader = dict(raw)
    adj = _csr(loader, "adj_matrix")
    if adj.shape[0] != adj.shape[1]:
        raise ValueError(f"adjacency must be square, got {adj.shape}")
    attr = _csr(loader, "attr_matrix")
    if "labels" not in loader:
        raise ValueError("npz file lacks 'labels'")
    labels = np.asarray(loader["labels"]).reshape(-1)
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
    """Keep the two given classes (default: the two largest), relabelled 0/1; optionally drop isolated nodes."""
    y = np.asarray(graph.labels)
    if classes is None:
        counts = np.bincount(y)
        classes = tuple(int(c) for c in np.argsort(-counts, kind="stable")[:2])
    keep = np.flatnonzero(np.isin(y, classes))
    adj = sp.csr_matrix(graph.adjacency)[keep][:, keep]
    if drop_isolated:
        deg = np.asarray(adj.sum(axis=1)).reshape(-1)
        sub = np.flatnonzero(deg > 0)
        keep, adj = keep[sub], adj[sub][:, sub]
    labels = (y[keep] == classes[1]).astype(int)
    feats = graph.features[keep]
    return Graph(adjacency=adj.toarray() if not sp.issparse(graph.adjacency) else adj, features=feats, labels=labels)
