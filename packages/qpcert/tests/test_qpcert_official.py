"""The official karate pipeline, checked against a transcription of the official procedure written here.

The transcription follows the official code path step by step (read, not imported): the karate graph with networkx's
edge weights and labels 1 = "Mr. Hi"; ``split_inductive(n_per_class=2, balance_test=True)`` on the
``Generator(PCG64(seed))`` stream; the collective experiment's test set (unlabelled nodes, then test nodes); the
closed-form NTK of GCN / SGC (row normalisation of triu(A) symmetrised with a unit diagonal) and GIN (A with a unit
diagonal), including the in-place covariance clamp of the ReLU expectations; the bias-free SVM dual with box
[0, C] (solved here by scipy's L-BFGS-B, an independent solver); and the collective MILP's meaning: the largest
number of test nodes whose logit one attack with k = int(delta m) flips moves to the other side of zero
(count_t = 1 is feasible iff s_t p_t <= 0), certified ratio = (n_test - that number) / n_test. Its exact optimum is
found by retraining on every labeling (m = 8: 2^8 labelings), as the MILP's optimum is by definition. Sample-wise
(the one-node experiment): a node is certified iff its worst-case s_t p_t over the budget stays > 0.
"""

import itertools
from collections import Counter

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from iclr25.qpcert import certify_curve, ntk_matrix
from iclr25.qpcert.cli import main
from iclr25.qpcert.data import Graph, karate_club, save_citation_npz, split_inductive
from iclr25.qpcert.reproduce import OFFICIAL_MODELS, load_official_binary, reproduce_citation

KARATE_DELTAS = (0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9, 1.0)  # official karate config (collective)
KARATE_C = (0.001, 0.01)  # official karate config: regularizer


# ----------------------------------------------------------------------------------------- the transcription
def official_karate():
    g = nx.karate_club_graph()
    order = sorted(g.nodes())
    a = nx.to_numpy_array(g, nodelist=order)
    y = np.array([1 if g.nodes[v]["club"] == "Mr. Hi" else 0 for v in g])
    return np.eye(a.shape[0]), a, y


def official_split_inductive(labels, n_per_class, fraction_test=0.1, seed=0):
    rng = np.random.Generator(np.random.PCG64(seed))
    nc = labels.max() + 1
    n_test_per_class = np.ceil(fraction_test * np.bincount(labels))
    lab, val, test = [], [], []
    for c in range(nc):
        perm = rng.permutation((labels == c).nonzero()[0])
        lab.append(perm[:n_per_class])
        val.append(perm[n_per_class : 2 * n_per_class])
        test.append(perm[2 * n_per_class : 2 * n_per_class + n_test_per_class[c].astype(int)])
    lab = rng.permutation(np.concatenate(lab))
    val = rng.permutation(np.concatenate(val))
    test = rng.permutation(np.concatenate(test))
    unlabeled = np.setdiff1d(np.arange(len(labels)), np.concatenate((lab, val, test)))
    return lab, unlabeled, val, test


def official_relu_expectations(m):
    m = m.copy()
    d = np.diag(m).copy()
    si, sj = d[None, :] + 0 * m, d[:, None] + 0 * m
    over = (m > si) | (m > sj)
    m[over] = np.minimum(si[over], sj[over])  # the official in-place clamp
    q = np.sqrt(si * sj)
    u = m / q
    np.fill_diagonal(u, 1.0)
    u = np.clip(u, -1.0, 1.0)
    k1 = (u * (np.pi - np.arccos(u)) + np.sqrt(1 - u * u)) / np.pi
    k0 = (np.pi - np.arccos(u)) / np.pi
    return q * k1, k0, m


def official_ntk(x, a, model):
    s = np.triu(a, 1) + np.triu(a, 1).T
    np.fill_diagonal(s, 1.0)
    if model in ("gcn", "sgc"):
        s = s / s.sum(axis=1, keepdims=True)
        sig = s @ (x @ x.T) @ s.T
        if model == "gcn":
            e, ed, sig = official_relu_expectations(sig)
        else:
            e, ed = sig, np.ones_like(sig)
        return s @ (sig * ed) @ s.T + s @ e @ s.T
    a = a.copy()
    np.fill_diagonal(a, 1.0)  # GIN: A + I (diagonal := 1)
    sig = a @ (x @ x.T) @ a.T
    e, ed, sig = official_relu_expectations(sig)
    return sig * ed + e


def official_svm(q_ll, y_pm, c):
    p = np.outer(y_pm, y_pm) * q_ll
    res = minimize(lambda a: (0.5 * a @ p @ a - a.sum(), p @ a - 1.0), np.full(len(y_pm), c / 2), jac=True,
                   method="L-BFGS-B", bounds=[(0.0, c)] * len(y_pm), options={"ftol": 1e-15, "gtol": 1e-13, "maxiter": 10000})  # fmt: skip
    return res.x


def official_curves(seed, model, c, deltas):
    x, a, y = official_karate()
    lab, unl, val, test = official_split_inductive(y, 2, seed=seed)
    test = np.concatenate((unl, test))  # exp_labelcert_collective: unlabelled nodes join the test set
    labeled = np.concatenate((lab, val))
    return official_certificates(official_ntk(x, a, model), y, labeled, test, c, deltas), labeled, test


def official_certificates(q, y, labeled, test, c, deltas):
    """Collective and sample-wise certified ratios / accuracies of every budget by retraining on every labeling."""
    q_ll, q_tl = q[np.ix_(labeled, labeled)], q[np.ix_(test, labeled)]
    y_pm = y[labeled] * 2 - 1
    clean = q_tl @ (official_svm(q_ll, y_pm, c) * y_pm)
    sign = np.where(clean >= 0, 1.0, -1.0)
    m = len(labeled)
    margins, flips = [], []
    for bits in itertools.product((-1.0, 1.0), repeat=m):
        yy = np.array(bits)
        margins.append(sign * (q_tl @ (official_svm(q_ll, yy, c) * yy)))
        flips.append(int((yy != y_pm).sum()))
    margins, flips = np.array(margins), np.array(flips)
    correct = (sign > 0) == (y[test] == 1)
    out = {"collective": [], "samplewise": [], "collective_accuracy": [], "samplewise_accuracy": []}
    for d in deltas:
        within = margins[flips <= int(d * m)]
        changed = within <= 0.0
        out["collective"].append((len(test) - changed.sum(axis=1).max()) / len(test))
        out["collective_accuracy"].append((correct.sum() - (changed & correct).sum(axis=1).max()) / len(test))
        cert = within.min(axis=0) > 0.0
        out["samplewise"].append(cert.mean())
        out["samplewise_accuracy"].append((cert & correct).mean())
    return out


def official_binary_from_npz(path):
    """get_cora_ml + _make_binary: binary features, symmetrised 0/1 adjacency, two largest classes (largest -> 1),
    isolated nodes dropped."""
    with np.load(path, allow_pickle=True) as f:
        ld = dict(f)
    a = sp.csr_matrix((ld["adj_matrix.data"], ld["adj_matrix.indices"], ld["adj_matrix.indptr"]),
                      shape=ld["adj_matrix.shape"]).toarray()  # fmt: skip
    x = (sp.csr_matrix((ld["attr_matrix.data"], ld["attr_matrix.indices"], ld["attr_matrix.indptr"]),
                       shape=ld["attr_matrix.shape"]).toarray() > 0).astype("float32")  # fmt: skip
    y = np.array(ld["labels"])
    lt, ut = np.tril(a) == 1, np.triu(a) == 1
    a = np.logical_or(np.logical_or(lt, lt.T), np.logical_or(ut, ut.T)).astype(np.int64)
    (first, _), (second, _) = Counter(y).most_common(2)
    cond = (y == first) | (y == second)
    a, x, y = a[cond][:, cond], x[cond], np.where(y[cond] == first, 1, 0)
    cond = a.sum(axis=1) > 0
    return x[cond].astype(np.float64), a[cond][:, cond], y[cond]


# ----------------------------------------------------------------------------------------- the checks
def test_official_karate_data_and_split():
    x, a, y = official_karate()
    g = karate_club()
    assert np.array_equal(g.adjacency, a) and a.max() > 1  # weights kept
    assert np.array_equal(g.labels, y) and y[0] == 1  # node 0 is Mr. Hi -> 1
    for seed in range(5):
        ours = split_inductive(g.labels, n_per_class=2, seed=seed)
        ref = official_split_inductive(y, 2, seed=seed)
        for o, r in zip(ours, ref):
            assert np.array_equal(o, r)


@pytest.mark.parametrize(
    "seed,cs", [(0, KARATE_C), pytest.param(1, KARATE_C, marks=pytest.mark.slow),
                pytest.param(2, KARATE_C, marks=pytest.mark.slow), pytest.param(3, KARATE_C, marks=pytest.mark.slow),
                pytest.param(4, KARATE_C, marks=pytest.mark.slow)],
)  # fmt: skip
@pytest.mark.parametrize("model", ["gcn", "sgc", "gin"])
def test_karate_curves_equal_the_official_procedure(seed, cs, model):
    g = karate_club()
    x, a, _ = official_karate()
    q = ntk_matrix(g.adjacency, g.features, arch=model, official_compat=True)
    assert np.allclose(q.numpy(), official_ntk(x, a, model), rtol=1e-12, atol=1e-14)
    for c in cs:
        ref, labeled, test = official_curves(seed, model, c, KARATE_DELTAS)
        ours = certify_curve(q, g.labels, labeled, test, budget_fractions=list(KARATE_DELTAS), C=c)
        for key in ("collective", "samplewise", "collective_accuracy", "samplewise_accuracy"):
            assert np.allclose(ours[key], ref[key], atol=1e-12), (key, c, ours[key], ref[key])


def _citation_like_npz(path):
    """A generated graph in the citation .npz layout: 3 classes (45/35/20 nodes), directed edge list (the loader
    must symmetrise), count-valued bag-of-words (must be binarised), a few isolated nodes (must be dropped)."""
    rng = np.random.default_rng(7)
    y = np.repeat([1, 0, 2], [45, 35, 20])
    n = len(y)
    prob = np.where(y[:, None] == y[None, :], 0.09, 0.015)
    a = np.triu(rng.random((n, n)) < prob, 1).astype(float)
    a[[3, 50], :], a[:, [3, 50]] = 0.0, 0.0  # isolated: one in each of the two largest classes
    centres = rng.random((3, 30)) < 0.25
    x = rng.poisson(0.4 + 1.2 * centres[y]) * (rng.random((n, 30)) < 0.7)
    save_citation_npz(path, Graph(adjacency=sp.csr_matrix(a), features=sp.csr_matrix(x.astype(float)), labels=y))


def test_citation_recipe_end_to_end_equals_the_official_procedure(tmp_path, capsys):
    path = tmp_path / "generated.npz"
    _citation_like_npz(path)
    x, a, y = official_binary_from_npz(path)
    g = load_official_binary(path)
    assert np.array_equal(np.asarray(sp.csr_matrix(g.adjacency).todense()), a) and np.array_equal(g.labels, y)
    assert np.array_equal(g.features, x) and len(y) == 78  # 45 + 35 minus the two isolated nodes
    deltas = (0.125, 0.25, 0.5, 1.0)
    recs = reproduce_citation(path, "cora_ml", ["GCN", "SGC", "GIN"], seeds=(1,), deltas=deltas, n_per_class=2,
                              n_test=20)  # fmt: skip
    for rec in recs:
        c = OFFICIAL_MODELS["cora_ml"][rec["model"]][0]
        assert rec["C"] == c and rec["m"] == 8 and rec["n_certified_nodes"] == 20 and rec["method"] == "enumerate"
        lab, unl, val, test = official_split_inductive(y, 2, seed=rec["seed"])
        test = np.random.Generator(np.random.PCG64(rec["seed"])).choice(np.concatenate((unl, test)), 20, replace=False)
        ref = official_certificates(official_ntk(x, a, rec["model"].lower()), y, np.concatenate((lab, val)), test, c,
                                    deltas)  # fmt: skip
        for key in ("collective", "samplewise", "collective_accuracy", "samplewise_accuracy"):
            assert np.allclose(rec[key], ref[key], atol=1e-12), (rec["model"], key, rec[key], ref[key])
    assert any(0 < v < 1 for rec in recs for v in rec["collective"])  # the curves are not trivially flat
    out = tmp_path / "records.json"
    main(["reproduce", "--npz", str(path), "--models", "GCN", "--seeds", "0,1", "--deltas", "0.125,0.25,0.5,1",
          "--n-per-class", "2", "--n-test", "20", "--out", str(out)])  # fmt: skip
    printed = capsys.readouterr().out
    assert "coll. cert. acc" in printed and "s-w ratio" in printed
    import json

    cli = json.loads(out.read_text())
    assert [r["seed"] for r in cli] == [0, 1] and cli[1]["collective"] == recs[0]["collective"]  # GCN, seed 1
    mean = np.mean([r["collective"][1] for r in cli])
    assert f"{mean:.3f} ± " in printed


def test_citation_recipe_rejects_bad_options(tmp_path):
    path = tmp_path / "generated.npz"
    _citation_like_npz(path)
    with pytest.raises(ValueError, match="dataset"):
        reproduce_citation(path, "pubmed")
    with pytest.raises(ValueError, match="model"):
        reproduce_citation(path, "cora_ml", ["APPNP"])  # Cora-MLb's APPNP config (alpha = 0) is not supported
    with pytest.raises(ValueError, match="deltas"):
        reproduce_citation(path, "cora_ml", ["GCN"], deltas=(2,))
