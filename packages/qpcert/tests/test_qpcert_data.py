"""Data generators (pinned official random-number order), splits, karate club, npz loader, binary subsets."""

import hashlib

import numpy as np
import pytest
import scipy.sparse as sp

from iclr25.qpcert import make_csbm
from iclr25.qpcert.data import (
    Graph,
    binary_subset,
    cba_graph,
    karate_club,
    load_citation_npz,
    save_citation_npz,
    split_csbm,
    split_inductive,
)


def test_csbm_official_random_order_is_pinned():
    g = make_csbm(n=200, seed=0)
    # the stream: PCG64(0).integers -> y; multivariate_normal per class (float32); binomial on the upper triangle
    rng = np.random.Generator(np.random.PCG64(0))
    y = rng.integers(0, 2, size=200)
    assert np.array_equal(g.labels, np.sort(y))
    assert g.features.shape == (200, round(200 / np.log(200) ** 2))
    assert hashlib.sha256(np.ascontiguousarray(g.adjacency).tobytes()).hexdigest()[:16] == "22a200b11c12677c"
    assert np.allclose(g.features[0, :3], [-1.62469304, -1.68499351, 0.21920951])
    assert np.array_equal(g.adjacency, g.adjacency.T) and np.all(np.diag(g.adjacency) == 0)


def test_csbm_edge_statistics_match_p_and_q():
    degs_in, degs_out = [], []
    for seed in range(5):
        g = make_csbm(n=200, seed=seed)
        same = g.labels[:, None] == g.labels[None, :]
        degs_in.append((g.adjacency * same).sum() / 200)
        degs_out.append((g.adjacency * ~same).sum() / 200)
    assert np.mean(degs_in) == pytest.approx(3.16, rel=0.15)
    assert np.mean(degs_out) == pytest.approx(0.74, rel=0.3)


def test_splits():
    g = make_csbm(n=200, seed=1)
    trn, val, test = split_csbm(g.labels, 20, 20, seed=1)
    assert len(trn) == len(val) == 20 and len(test) == 160
    assert g.labels[trn].sum() == 10 and g.labels[val].sum() == 10
    assert len(np.unique(np.concatenate([trn, val, test]))) == 200
    k = karate_club()
    trn, unl, val, test = split_inductive(k.labels, n_per_class=2, seed=0)
    assert len(trn) == len(val) == 4 and np.bincount(k.labels[trn]).tolist() == [2, 2]
    assert len(np.unique(np.concatenate([trn, unl, val, test]))) == 34
    rng = np.random.Generator(np.random.PCG64(0))  # the official stream: class 0 is permuted first
    assert set(trn[k.labels[trn] == 0]) == set(rng.permutation(np.flatnonzero(k.labels == 0))[:2])
    legacy = np.random.RandomState(0).permutation(np.flatnonzero(k.labels == 0))[:2]  # the old (wrong) stream
    assert set(trn[k.labels[trn] == 0]) != set(legacy)


def test_karate_club():
    k = karate_club()
    assert k.n == 34 and (k.adjacency > 0).sum() == 2 * 78 and np.bincount(k.labels).tolist() == [17, 17]
    assert k.adjacency.sum() == 2 * 231 and k.adjacency.max() == 7  # networkx's weights (shared activities) kept
    assert k.labels[0] == 1 and k.labels[33] == 0  # node 0 is Mr. Hi -> 1 (official), node 33 the officer
    assert np.array_equal(k.features, np.eye(34))


def test_cba_graph():
    g = cba_graph(80, 2, 4.0, 1.0, seed=3)
    assert np.array_equal(g.adjacency, g.adjacency.T)
    assert g.adjacency.sum() > 0 and np.all(np.diff(g.labels) >= 0)
    again = cba_graph(80, 2, 4.0, 1.0, seed=3)
    assert np.array_equal(g.adjacency, again.adjacency)
    with pytest.raises(ValueError):
        cba_graph(2, 1, 1.0, 1.0)


def test_citation_npz_roundtrip(tmp_path):
    rng = np.random.default_rng(0)
    n = 30
    a = np.triu((rng.random((n, n)) < 0.15).astype(float), 1)
    a[0, :] = 0
    a[:, 0] = 0  # node 0 isolated -> dropped by the largest component
    a = a + a.T
    a[5, 5] = 1.0  # a self loop, removed on load
    x = (rng.random((n, 12)) < 0.3).astype(float)
    y = rng.integers(0, 3, size=n)
    path = tmp_path / "cora_like.npz"
    save_citation_npz(path, Graph(adjacency=sp.csr_matrix(a), features=x, labels=y))
    g = load_citation_npz(path)
    assert g.adjacency.shape[0] < n and g.adjacency.diagonal().sum() == 0
    assert g.features.shape[1] == 12 and len(g.labels) == g.adjacency.shape[0]
    b = binary_subset(g)
    assert set(np.unique(b.labels)) <= {0, 1}
    with pytest.raises(ValueError, match="does not exist"):
        load_citation_npz(tmp_path / "missing.npz")
    np.savez(tmp_path / "broken.npz", labels=y)
    with pytest.raises(ValueError, match="adj_matrix"):
        load_citation_npz(tmp_path / "broken.npz")
