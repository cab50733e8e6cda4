"""The bias-free kernel SVM against cvxpy (Clarabel), its KKT residual, batching, one-vs-rest and bad input."""

import numpy as np
import pytest
import torch

from iclr25.qpcert import KernelSVM
from iclr25.qpcert.svm import solve_batch

cp = pytest.importorskip("cvxpy")


def random_problem(m, rank, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m + 5, rank, generator=g, dtype=torch.float64)
    q = x @ x.T
    y = np.where(np.random.default_rng(seed).random(m) < 0.5, -1.0, 1.0)
    return q, y


def cvxpy_svm(q, y, c):
    m = len(y)
    p = (y[:, None] * y[None, :]) * q
    w, v = np.linalg.eigh(p)
    root = v * np.sqrt(np.clip(w, 0, None))
    a = cp.Variable(m)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(root.T @ a) - cp.sum(a)), [a >= 0, a <= c])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return a.value, prob.value


@pytest.mark.parametrize("seed,c,rank", [(0, 0.01, 12), (1, 1.0, 12), (2, 100.0, 12), (3, 1.0, 3), (4, 10.0, 2)])
def test_svm_equals_cvxpy(seed, c, rank):
    m = 12
    q, y = random_problem(m, rank, seed)
    qll, qtl = q[:m, :m], q[m:, :m]
    svm = KernelSVM(C=c).fit(qll, y)
    a_ref, obj_ref = cvxpy_svm(qll.numpy(), y, c)
    p = (y[:, None] * y[None, :]) * qll.numpy()
    a = svm.alpha_.numpy()
    obj = 0.5 * a @ p @ a - a.sum()
    assert svm.kkt_residual_ < 1e-9 and svm.converged_
    assert obj <= obj_ref + 1e-7 * max(1.0, abs(obj_ref))
    scores_ref = qtl.numpy() @ (y * a_ref)
    scale = max(1.0, np.abs(scores_ref).max())
    assert np.allclose(svm.decision_function(qtl).numpy(), scores_ref, atol=1e-5 * scale)


def test_batched_equals_individual_and_sign_symmetry():
    q, _ = random_problem(9, 9, 7)
    q = q[:9, :9]
    ys = torch.where(torch.rand(16, 9, generator=torch.Generator().manual_seed(1)) < 0.5, -1.0, 1.0).double()
    sol = solve_batch(q, ys, 0.7)
    assert bool(sol.converged.all())
    for i in range(4):
        single = KernelSVM(C=0.7).fit(q, ys[i].numpy())
        assert torch.allclose(single.alpha_, sol.alpha[i], atol=1e-9)
    neg = solve_batch(q, -ys, 0.7)
    assert torch.allclose(neg.alpha, sol.alpha, atol=1e-9)


def test_small_c_regime_gives_all_alpha_equal_c():
    q, y = random_problem(10, 10, 8)
    q = q[:10, :10]
    c = 0.9 / float(q.abs().sum(1).max())
    svm = KernelSVM(C=c).fit(q, y)
    assert torch.allclose(svm.alpha_, torch.full((10,), c, dtype=torch.float64))


def test_one_vs_rest_equals_separate_binary_problems():
    q, _ = random_problem(12, 12, 9)
    qll, qtl = q[:12, :12], q[12:, :12]
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 2, 1, 0])
    svm = KernelSVM(C=1.0).fit(qll, labels)
    assert svm.alpha_.shape == (3, 12)
    scores = svm.decision_function(qtl)
    for k in range(3):
        binary = KernelSVM(C=1.0).fit(qll, np.where(labels == k, 1, -1))
        assert torch.allclose(scores[:, k], binary.decision_function(qtl), atol=1e-8)
    assert np.array_equal(svm.predict(qtl), np.arange(3)[scores.argmax(1).numpy()])


def test_bad_input():
    q, y = random_problem(6, 6, 10)
    q = q[:6, :6]
    with pytest.raises(ValueError, match="C"):
        KernelSVM(C=0.0)
    with pytest.raises(ValueError, match="C"):
        KernelSVM(C=-1)
    with pytest.raises(ValueError, match="positive semi-definite"):
        KernelSVM().fit(q - 100 * torch.eye(6, dtype=torch.float64), y)
    with pytest.raises(ValueError, match="square"):
        KernelSVM().fit(q[:, :4], y)
    asym = q.clone()
    asym[0, 1] += 1.0
    with pytest.raises(ValueError, match="symmetric"):
        KernelSVM().fit(asym, y)
    nan = q.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        KernelSVM().fit(nan, y)
    with pytest.raises(ValueError, match="labels"):
        KernelSVM().fit(q, y[:3])
    with pytest.raises(ValueError, match="not fitted"):
        KernelSVM().predict(q)
