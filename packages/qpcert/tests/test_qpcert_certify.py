"""Certificates proven against brute force: every MILP backend and formulation, the sort and enumeration paths,
witnesses, invariants, multiclass, time-outs and bad input."""

import numpy as np
import pytest
import torch

from iclr25.qpcert import brute_force_label_flips, certify_label_flips, make_csbm, ntk_matrix
from iclr25.qpcert.certify import _prepare, certify_curve, resolve_budget
from iclr25.qpcert.experiments import karate_dataset
from iclr25.qpcert.milp import available_solvers


def instance(seed, m_per_class=5, n=60, t=6, arch="gcn"):
    g = make_csbm(n, seed=seed, K=3.0)
    q = ntk_matrix(g.adjacency, g.features, arch=arch)
    rng = np.random.default_rng(seed)
    tr = np.concatenate([rng.choice(np.flatnonzero(g.labels == c), m_per_class, replace=False) for c in (0, 1)])
    te = np.setdiff1d(np.arange(n), tr)[::5][:t]
    return q, g.labels, tr, te


C_FREE = 0.5  # C * max row sum ~ 10-15: many labelings have free support vectors, the sort shortcut does not apply


@pytest.fixture(scope="module")
def inst0():
    return instance(0)


@pytest.fixture(scope="module")
def inst3():
    return instance(3)


def test_instances_have_free_support_vectors(inst0, inst3):
    for q, y, tr, te in (inst0, inst3):
        s = _prepare(q, y, tr, te, C_FREE)
        a = s.alphas[0]
        assert ((a > 1e-9) & (a < C_FREE * (1 - 1e-9))).sum() >= 2
        assert not s.sort_regime


@pytest.mark.parametrize(
    "which,budget",
    [
        ("inst0", 1),
        ("inst3", 2),
        pytest.param("inst0", 2, marks=pytest.mark.slow),
        pytest.param("inst3", 1, marks=pytest.mark.slow),
    ],
)
def test_highs_milp_equals_brute_force_samplewise(which, budget, request):
    q, y, tr, te = request.getfixturevalue(which)
    bf = brute_force_label_flips(q, y, tr, te, budget, C_FREE)
    ml = certify_label_flips(q, y, tr, te, budget, C_FREE, method="milp", exact_margin=True)
    assert ml.status == bf.status
    assert np.allclose(ml.margin, bf.margin, atol=1e-6)
    fast = certify_label_flips(q, y, tr, te, budget, C_FREE, method="milp")  # decision mode: same statuses
    assert fast.status == bf.status


@pytest.mark.parametrize("solver", [s for s in ("scip", "scipy") if s in available_solvers()])
def test_other_backends_equal_brute_force(inst3, solver):
    q, y, tr, te = inst3
    te = te[:4]
    bf = brute_force_label_flips(q, y, tr, te, 1, C_FREE)
    ml = certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", solver=solver, exact_margin=True)
    assert ml.status == bf.status
    assert np.allclose(ml.margin, bf.margin, atol=1e-6)
    bc = brute_force_label_flips(q, y, tr, te, 2, C_FREE, mode="collective")
    mc = certify_label_flips(q, y, tr, te, 2, C_FREE, mode="collective", method="milp", solver=solver)
    assert mc.n_changed == mc.n_changed_bound == bc.n_changed


def test_official_formulation_equals_compact(inst0):
    q, y, tr, te = inst0
    te = te[:2]
    a = certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", formulation="official", exact_margin=True)
    b = certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", formulation="compact", exact_margin=True)
    assert a.status == b.status and np.allclose(a.margin, b.margin, atol=1e-6)


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_collective_milp_equals_brute_force(inst0, budget):
    q, y, tr, te = inst0
    bc = brute_force_label_flips(q, y, tr, te, budget, C_FREE, mode="collective")
    mc = certify_label_flips(q, y, tr, te, budget, C_FREE, mode="collective", method="milp")
    assert mc.n_changed == mc.n_changed_bound == bc.n_changed == bc.n_changed_bound
    sw = brute_force_label_flips(q, y, tr, te, budget, C_FREE)
    assert mc.certified_ratio >= sw.certified_ratio - 1e-12


def test_witnesses_really_flip_the_prediction(inst0):
    q, y, tr, te = inst0
    res = certify_label_flips(q, y, tr, te, 2, C_FREE, method="milp")
    from iclr25.qpcert import KernelSVM

    pos = {node: i for i, node in enumerate(tr)}
    for r, status in enumerate(res.status):
        if status != "not_certified":
            continue
        y_att = y.copy()
        assert 0 < len(res.flips[r]) <= 2
        for node in res.flips[r]:
            y_att[node] = 1 - y_att[node]
        svm = KernelSVM(C=C_FREE).fit(q[np.ix_(tr, tr)], np.where(y_att[tr] == 1, 1, -1))
        score = float(svm.decision_function(q[np.ix_(te[r : r + 1], tr)])[0])
        clean = 1 if res.clean_prediction[r] == 1 else -1
        assert clean * score <= 1e-4
        assert all(node in pos for node in res.flips[r])


def test_invariants_budget_zero_monotone_and_sign_symmetry(inst3):
    q, y, tr, te = inst3
    curve = certify_curve(q, y, tr, te, [0, 1, 2, 3, 10], C_FREE)
    assert curve["samplewise"][0] == 1.0  # every clean margin here is non-zero
    assert all(a >= b for a, b in zip(curve["samplewise"], curve["samplewise"][1:]))
    assert all(a >= b for a, b in zip(curve["collective"], curve["collective"][1:]))
    assert all(c >= s for c, s in zip(curve["collective"], curve["samplewise"]))
    assert curve["samplewise"][-1] == 0.0  # k = m flips everything: p -> -p
    r0 = certify_label_flips(q, y, tr, te, 0, C_FREE, method="milp")
    assert all(s == "certified" for s in r0.status)
    flipped = certify_label_flips(q, 1 - y, tr, te, 1, C_FREE)
    base = certify_label_flips(q, y, tr, te, 1, C_FREE)
    assert flipped.status == base.status and np.allclose(flipped.margin, base.margin, atol=1e-9)


def test_sort_path_agrees_with_milp_and_enumeration_in_its_regime(inst0):
    q, y, tr, te = inst0
    c = 0.9 / float(q[np.ix_(tr, tr)].abs().sum(1).max())
    for k in (1, 2, 3):
        srt = certify_label_flips(q, y, tr, te, k, c, method="sort")
        enu = certify_label_flips(q, y, tr, te, k, c, method="enumerate")
        mil = certify_label_flips(q, y, tr, te, k, c, method="milp", exact_margin=True)
        assert srt.status == enu.status == mil.status
        assert np.allclose(srt.margin, enu.margin, atol=1e-9) and np.allclose(srt.margin, mil.margin, atol=1e-6)
        cs = certify_label_flips(q, y, tr, te, k, c, mode="collective", method="sort")
        ce = certify_label_flips(q, y, tr, te, k, c, mode="collective", method="enumerate")
        assert cs.n_changed_bound == ce.n_changed_bound == ce.n_changed
    with pytest.raises(ValueError, match="sort"):
        certify_label_flips(q, y, tr, te, 1, C_FREE, method="sort")


def test_greedy_sort_would_be_wrong_with_free_support_vectors(inst0):
    """A lazy 'sort everywhere' certificate disagrees with brute force on this instance."""
    q, y, tr, te = inst0
    bf = brute_force_label_flips(q, y, tr, te, 1, C_FREE)
    s = _prepare(q, y, tr, te, C_FREE)
    gains = 2 * C_FREE * s.clean_dir[:, None] * s.labels_hat[None, :] * s.q_tl.numpy()
    naive = C_FREE * (s.q_tl.numpy() @ s.labels_hat) * s.clean_dir - gains.max(1).clip(min=0)
    assert not np.allclose(naive, bf.margin, atol=1e-3)


def test_karate_gin_all_paths_agree():
    ds = karate_dataset()
    q = ntk_matrix(ds.adjacency, ds.features, arch="gin")
    te = ds.idx_test[::3]
    for k in (1, 2):
        bf = brute_force_label_flips(q, ds.labels, ds.idx_labeled, te, k, 1.0)
        auto = certify_label_flips(q, ds.labels, ds.idx_labeled, te, k, 1.0)
        ml = certify_label_flips(q, ds.labels, ds.idx_labeled, te, k, 1.0, method="milp")
        assert auto.method == "enumerate"
        assert bf.status == auto.status == ml.status
        bc = brute_force_label_flips(q, ds.labels, ds.idx_labeled, te, k, 1.0, mode="collective")
        mc = certify_label_flips(q, ds.labels, ds.idx_labeled, te, k, 1.0, mode="collective", method="milp")
        assert bc.n_changed == mc.n_changed == mc.n_changed_bound


def test_multiclass_milp_equals_brute_force():
    g = make_csbm(45, seed=5, K=3.0)
    q = ntk_matrix(g.adjacency, g.features, arch="gcn")
    labels = g.labels.copy()
    labels[np.arange(45) % 3 == 0] = 2  # three classes
    rng = np.random.default_rng(0)
    tr = np.concatenate([rng.choice(np.flatnonzero(labels == c), 3, replace=False) for c in range(3)])
    te = np.setdiff1d(np.arange(45), tr)[::6][:3]
    for k in (2,):  # k >= 2: the minimum over competing classes must come with its own witness
        bf = brute_force_label_flips(q, labels, tr, te, k, C_FREE)
        ml = certify_label_flips(q, labels, tr, te, k, C_FREE, method="milp", exact_margin=True)
        assert "not_certified" in bf.status
        assert ml.status == bf.status and np.allclose(ml.margin, bf.margin, atol=1e-6)
        assert ml.margin_exact.all()
    bc = brute_force_label_flips(q, labels, tr, te, 1, C_FREE, mode="collective")
    mc = certify_label_flips(q, labels, tr, te, 1, C_FREE, mode="collective", method="milp")
    assert bc.n_changed == mc.n_changed == mc.n_changed_bound
    c = 0.9 / float(q[np.ix_(tr, tr)].abs().sum(1).max())
    srt = certify_label_flips(q, labels, tr, te, 2, c, method="sort")
    enu = certify_label_flips(q, labels, tr, te, 2, c, method="enumerate")
    assert srt.status == enu.status and np.allclose(srt.margin, enu.margin, atol=1e-9)


def test_tiny_time_limit_gives_unknown_never_certified():
    q, y, tr, te = instance(1, m_per_class=10, n=80, t=3)
    bf_status = None
    res = certify_label_flips(q, y, tr, te, 4, C_FREE, method="milp", time_limit=1e-4)
    for s in res.status:
        assert s in ("unknown", "not_certified")
    assert "unknown" in res.status
    res_c = certify_label_flips(q, y, tr, te, 4, C_FREE, mode="collective", method="milp", time_limit=1e-4)
    assert res_c.n_changed_bound >= res_c.n_changed
    del bf_status


def test_budget_resolution_and_bad_input(inst0):
    q, y, tr, te = inst0
    assert resolve_budget(None, 40, budget_fraction=0.25) == 10 and resolve_budget(3, 10) == 3
    assert resolve_budget(50, 10) == 10 and resolve_budget(np.int64(2), 10) == 2
    assert resolve_budget(None, 8, budget_fraction=0.7) == 5  # official int(delta * m)
    with pytest.raises(TypeError):
        resolve_budget(True, 10)
    with pytest.raises(TypeError, match="budget_fraction"):
        resolve_budget(0.25, 40)  # a float count is ambiguous: refused
    with pytest.raises(TypeError, match="budget_fraction"):
        resolve_budget(1.0, 40)
    with pytest.raises(ValueError, match="budget_fraction"):
        resolve_budget(None, 10, budget_fraction=1.5)
    with pytest.raises(ValueError, match="not both"):
        resolve_budget(2, 10, budget_fraction=0.5)
    with pytest.raises(ValueError, match="budget"):
        resolve_budget(None, 10)
    with pytest.raises(ValueError, match="mode"):
        certify_label_flips(q, y, tr, te, 1, mode="both")
    with pytest.raises(ValueError, match="method"):
        certify_label_flips(q, y, tr, te, 1, method="guess")
    with pytest.raises(ValueError, match="C"):
        certify_label_flips(q, y, tr, te, 1, C=0.0)
    with pytest.raises(ValueError, match="labels of all"):
        certify_label_flips(q, y[:5], tr, te, 1)
    with pytest.raises(ValueError, match="solver"):
        certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", solver="cplex")
    with pytest.raises(ValueError, match="positive semi-definite"):
        certify_label_flips(q - 50 * torch.eye(q.shape[0], dtype=torch.float64), y, tr, te, 1)
