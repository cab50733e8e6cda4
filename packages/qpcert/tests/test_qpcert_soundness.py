"""Soundness: no failing solver status, time-out, negative tolerance or scale change can produce "certified";
the multi-class exact margin comes with its own witness; brute force refuses huge problems; bad input is refused."""

import numpy as np
import pytest
import torch

from iclr25.qpcert import brute_force_label_flips, certify_label_flips, make_csbm, ntk_matrix
from iclr25.qpcert.data import karate_club, load_citation_npz, split_inductive
from iclr25.qpcert.milp import available_solvers

C_FREE = 0.5  # free support vectors: the KKT MILP is needed


@pytest.fixture(scope="module")
def tiny():
    """m = 6 labelled nodes, 4 test nodes, free support vectors; some nodes are certified at budget 1."""
    g = make_csbm(50, seed=2, K=3.0)
    q = ntk_matrix(g.adjacency, g.features, arch="gcn")
    rng = np.random.default_rng(2)
    tr = np.concatenate([rng.choice(np.flatnonzero(g.labels == c), 3, replace=False) for c in (0, 1)])
    te = np.setdiff1d(np.arange(50), tr)[::7][:4]
    return q, g.labels, tr, te


def _inject(monkeypatch, solver: str, status: str):
    """Make the solver library itself report ``status`` (the package's status mapping is under test)."""
    if solver == "highs":
        import highspy

        code = {"infeasible": "kInfeasible", "error": "kSolveError", "time_limit": "kTimeLimit",
                "unknown": "kUnknown", "interrupt": "kInterrupt"}[status]  # fmt: skip
        monkeypatch.setattr(highspy.Highs, "getModelStatus", lambda self: getattr(highspy.HighsModelStatus, code))
    elif solver == "scip":
        import pyscipopt

        word = {"infeasible": "infeasible", "error": "unknown", "time_limit": "timelimit",
                "unknown": "nodelimit", "interrupt": "userinterrupt"}[status]  # fmt: skip

        class Failing(pyscipopt.Model):
            def getStatus(self):
                return word

        monkeypatch.setattr(pyscipopt, "Model", Failing)
    else:
        import scipy.optimize

        real = scipy.optimize.milp
        code = {"infeasible": 2, "error": 4, "time_limit": 1, "unknown": 3, "interrupt": 4}[status]

        def failing(*args, **kwargs):
            res = real(*args, **kwargs)
            res.status = code
            return res

        monkeypatch.setattr(scipy.optimize, "milp", failing)


@pytest.mark.parametrize("solver", [s for s in ("highs", "scip", "scipy") if s in available_solvers()])
def test_failing_solver_status_never_certifies(tiny, solver, monkeypatch):
    q, y, tr, te = tiny
    real = certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", solver=solver)
    assert "certified" in real.status  # so the injected runs below have something to lose
    te = te[[i for i, s in enumerate(real.status) if s == "certified"][:2]]  # keep the injected runs small
    real_c = certify_label_flips(q, y, tr, te, 1, C_FREE, mode="collective", method="milp", solver=solver)
    assert real_c.certified_ratio > 0
    statuses = ("infeasible", "error", "time_limit", "unknown", "interrupt")
    if solver == "scip":  # SCIP builds its model in Python (slow): the three kinds of failure only
        statuses = ("infeasible", "error", "time_limit")
    for status in statuses:
        with monkeypatch.context() as mp:
            _inject(mp, solver, status)
            if status != "interrupt":  # (decision mode stops by interrupting on purpose once the sign is decided)
                res = certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", solver=solver)
                assert "certified" not in res.status, (solver, status, res.status)
                if status != "time_limit":
                    assert set(res.status) == {"unknown"}, (solver, status, res.status)
            res = certify_label_flips(q, y, tr, te, 1, C_FREE, method="milp", solver=solver, exact_margin=True)
            assert "certified" not in res.status, (solver, status, res.status)
            col = certify_label_flips(q, y, tr, te, 1, C_FREE, mode="collective", method="milp", solver=solver)
            assert "certified" not in col.status, (solver, status, col.status)
            if status != "time_limit":  # no usable dual bound: nothing is certified collectively either
                assert col.certified_ratio == 0.0 and col.certified_accuracy == 0.0


def test_tolerance_must_be_non_negative_and_a_margin_within_it_is_not_certified(tiny):
    q, y, tr, te = tiny
    for bad in (-1e-6, float("nan"), float("inf"), "1e-4", True):
        with pytest.raises(ValueError, match="tol"):
            certify_label_flips(q, y, tr, te, 0, C_FREE, tol=bad)
    base = certify_label_flips(q, y, tr, te, 0, C_FREE, tol=0.0)
    assert all(s == "certified" for s in base.status)  # every clean margin is positive
    rel = base.margin / (C_FREE * q[np.ix_(te, tr)].abs().sum(1).numpy())
    cut = float(np.median(rel))
    res = certify_label_flips(q, y, tr, te, 0, C_FREE, tol=cut)
    for r, status in enumerate(res.status):
        assert (status == "certified") == (rel[r] > cut), (rel[r], cut, status)
    assert res.status.count("certified") < len(te)  # the mutant "margin > 0 certifies" would fail here


def test_scaling_c_in_the_all_alpha_equal_c_regime_leaves_certificates_unchanged():
    g = karate_club()
    trn, _, val, _ = split_inductive(g.labels, n_per_class=2, seed=0)
    lab = np.concatenate([trn, val])
    te = np.setdiff1d(np.arange(34), lab)
    q = ntk_matrix(g.adjacency, g.features, arch="gcn", official_compat=True)
    cs = (0.001, 0.01, 1.0)  # C max_i sum_j |Q_ij| <= 0.993: every alpha = C for every labeling
    assert max(cs) * float(q[np.ix_(lab, lab)].abs().sum(1).max()) <= 1.0
    for k in (0, 1):
        runs = [certify_label_flips(q, g.labels, lab, te, k, c, method=m) for c in cs for m in ("sort", "milp")]
        for r in runs[1:]:
            assert r.status == runs[0].status, k
        # an absolute tolerance would not be scale-free here: some margin crosses 1e-4 between C = 0.001 and C = 1
        small, large = np.abs(runs[0].margin), np.abs(runs[-2].margin)
        assert k > 0 or np.any((small <= 1e-4) & (large > 1e-4))
    col = [certify_label_flips(q, g.labels, lab, te, 1, c, mode="collective").certified_ratio for c in cs]
    assert col[0] == col[1] == col[2]


def test_multiclass_exact_margin_is_the_minimum_with_its_witness():
    g = make_csbm(45, seed=5, K=3.0)
    q = ntk_matrix(g.adjacency, g.features, arch="gcn")
    labels = g.labels.copy()
    labels[np.arange(45) % 3 == 0] = 2
    rng = np.random.default_rng(1)
    tr = np.concatenate([rng.choice(np.flatnonzero(labels == c), 2, replace=False) for c in range(3)])
    te = np.setdiff1d(np.arange(45), tr)[::9][:4]
    bf = brute_force_label_flips(q, labels, tr, te, 2, C_FREE)
    ml = certify_label_flips(q, labels, tr, te, 2, C_FREE, method="milp", exact_margin=True)
    assert "not_certified" in bf.status
    assert ml.status == bf.status and np.allclose(ml.margin, bf.margin, atol=1e-6) and ml.margin_exact.all()


def test_brute_force_refuses_huge_problems_and_float_budgets():
    g = make_csbm(120, seed=0)
    q = ntk_matrix(g.adjacency, g.features, arch="sgc")
    tr, te = np.arange(0, 120, 3)[:40], np.arange(1, 120, 3)[:5]
    with pytest.raises(ValueError, match="max_qps"):
        brute_force_label_flips(q, g.labels, tr, te, 12, 0.001)  # sum_j C(40, j), j <= 12: ~9e9 SVMs
    with pytest.raises(ValueError, match="max_qps"):
        brute_force_label_flips(q, g.labels, tr, te, 2, 0.001, max_qps=100)
    with pytest.raises(TypeError, match="budget_fraction"):
        brute_force_label_flips(q, g.labels, tr, te, 0.25, 0.001)
    with pytest.raises(TypeError, match="budget_fraction"):
        certify_label_flips(q, g.labels, tr, te, 1.0, 0.001)
    a = certify_label_flips(q, g.labels, tr, te, budget_fraction=0.05, C=0.001)
    b = certify_label_flips(q, g.labels, tr, te, 2, 0.001)
    assert a.budget == b.budget == 2 and a.status == b.status


def test_bad_input_gets_clear_errors(tiny, tmp_path, capfd):
    q, y, tr, te = tiny
    with pytest.raises(ValueError, match="overlap"):
        certify_label_flips(q, y, tr, np.r_[te, tr[:1]], 1, C_FREE)
    mask = np.zeros(len(y), bool)
    mask[tr] = True
    with pytest.raises(TypeError, match="boolean mask"):
        certify_label_flips(q, y, mask, te, 1, C_FREE)
    with pytest.raises(TypeError, match="integer node ids"):
        certify_label_flips(q, y, tr.astype(float) + 0.5, te, 1, C_FREE)
    with pytest.raises(TypeError, match="integer node ids"):
        certify_label_flips(q, y, tr, te.astype(float), 1, C_FREE)
    y_nan = y.astype(float)
    y_nan[tr[0]] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        certify_label_flips(q, y_nan, tr, te, 1, C_FREE)
    with pytest.raises(ValueError, match="empty"):
        certify_label_flips(q, y, tr, [], 1, C_FREE)
    with pytest.raises(ValueError, match="empty"):
        certify_label_flips(np.zeros((0, 0)), [], [], [], 1, C_FREE)
    g = make_csbm(30, seed=0)
    with pytest.raises(ValueError, match="overflowed"):
        ntk_matrix(g.adjacency, g.features * 1e160, arch="gcn")
    with pytest.raises(ValueError, match="appnp_iterations"):
        ntk_matrix(g.adjacency, g.features, arch="appnp", appnp_iterations=-1)
    # malformed npz: a column id out of range must raise a clear error, not print "Exception ignored"
    arrays = {"adj_matrix.data": np.ones(2), "adj_matrix.indices": np.array([1, 7]), "adj_matrix.indptr": np.array([0, 1, 2]),
              "adj_matrix.shape": np.array([2, 2]), "attr_matrix.data": np.ones(2), "attr_matrix.indices": np.array([0, 0]),
              "attr_matrix.indptr": np.array([0, 1, 2]), "attr_matrix.shape": np.array([2, 1]), "labels": np.array([0, 1])}  # fmt: skip
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="out of range"):
        load_citation_npz(path)
    arrays["adj_matrix.indices"] = np.array([1, 0])
    arrays["adj_matrix.indptr"] = np.array([0, 1, 5])
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="indptr"):
        load_citation_npz(path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="npz"):
        load_citation_npz(tmp_path / "junk.npz")
    assert "Exception ignored" not in capfd.readouterr().err


def test_only_the_labelled_block_must_be_psd(tiny):
    q, y, tr, te = tiny
    bad = q.clone()
    bad[te[0], te[0]] = -10.0  # the full matrix is indefinite, Q_LL and Q_TL are untouched
    assert float(torch.linalg.eigvalsh(bad)[0]) < -1.0
    a = certify_label_flips(bad, y, tr, te, 1, C_FREE, method="enumerate")
    b = certify_label_flips(q, y, tr, te, 1, C_FREE, method="enumerate")
    assert a.status == b.status and np.allclose(a.margin, b.margin)
    ll_bad = q.clone()
    ll_bad[tr[0], tr[0]] = -10.0
    with pytest.raises(ValueError, match="Q_LL"):
        certify_label_flips(ll_bad, y, tr, te, 1, C_FREE)


def test_a_failed_collective_milp_is_tightened_by_samplewise_certificates(tiny, monkeypatch):
    from iclr25.qpcert.certify import _tighten_collective

    q, y, tr, te = tiny
    sw = certify_label_flips(q, y, tr, te, 1, C_FREE, method="enumerate")
    n_sw = sw.status.count("certified")
    assert 0 < n_sw < len(te)
    exact = certify_label_flips(q, y, tr, te, 1, C_FREE, mode="collective", method="enumerate")
    with monkeypatch.context() as mp:
        _inject(mp, "highs", "error")
        col = certify_label_flips(q, y, tr, te, 1, C_FREE, mode="collective", method="milp")
    assert col.certified_ratio == 0.0  # nothing proven by the failed solve
    col = _tighten_collective(col, sw)
    assert col.certified_ratio == n_sw / len(te) <= exact.certified_ratio
    assert [s == "certified" for s in col.status] == [s == "certified" for s in sw.status]
    assert col.certified_accuracy == sw.certified_accuracy
