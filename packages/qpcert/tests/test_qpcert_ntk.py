"""Closed-form NTKs: arc-cosine expectations vs Monte Carlo, closed forms vs empirical NTKs of finite networks,
explicit formulas, operators, official-compat mode and bad input."""

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from iclr25.qpcert import ntk_matrix
from iclr25.qpcert.config import ArchSpec
from iclr25.qpcert.empirical import mean_empirical_ntk, monte_carlo_expectations
from iclr25.qpcert.graph import appnp_operator, gin_operator, row_normalize, sage_operator, sym_normalize
from iclr25.qpcert.ntk import arccos_expectations, kappa0, kappa1, ntk_from_spec


def small_graph(n=8, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(n, n, generator=g) < 0.4).double()
    a = torch.triu(a, 1)
    a = a + a.T
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return a, x


def rel(a, b):
    return float((a - b).norm() / b.norm())


def test_arccos_expectations_match_monte_carlo():
    g = torch.Generator().manual_seed(3)
    z = torch.randn(5, 3, generator=g, dtype=torch.float64)
    sigma = z @ z.T + 0.2 * torch.eye(5, dtype=torch.float64)
    e, ed, _ = arccos_expectations(sigma)
    e_mc, ed_mc = monte_carlo_expectations(sigma, samples=400_000, seed=1)
    assert torch.allclose(e, e_mc, atol=0.02 * float(sigma.diagonal().max()))
    assert torch.allclose(ed, ed_mc, atol=0.01)


def test_kappa_closed_forms_at_special_points():
    u = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    assert torch.allclose(kappa0(u), torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64))
    assert torch.allclose(kappa1(u), torch.tensor([0.0, 1 / np.pi, 1.0], dtype=torch.float64))


CASES = [
    dict(arch="mlp"),
    dict(arch="gcn"),
    dict(arch="gcn", activation="linear"),
    dict(arch="sgc", activation="linear"),
    dict(arch="sage"),
    dict(arch="gin"),
    dict(arch="appnp"),
    dict(arch="gcn", skip="pc"),
    dict(arch="gcn", skip="alpha"),
    dict(arch="sgc", activation="linear", skip="pc"),
    dict(arch="sage", skip="alpha"),
    dict(arch="gcn", depth=2),
    dict(arch="gin", depth=2),
    dict(arch="mlp", depth=2, activation="linear"),
    dict(arch="gcn", depth=2, skip="pc"),
    dict(arch="gin", activation="linear"),
    dict(arch="appnp", activation="linear"),
    dict(arch="sage", activation="linear"),
    dict(arch="sage", skip="pc"),
    dict(arch="gcn", activation="linear", skip="alpha"),
    dict(arch="appnp", depth=2),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_closed_form_is_the_limit_of_empirical_ntks(kw):
    a, x = small_graph()
    spec = ArchSpec(**kw)
    closed = ntk_from_spec(a, x, spec)
    narrow, wide = (32, 512) if spec.depth > 1 else (64, 4096)
    err_narrow = rel(mean_empirical_ntk(a, x, spec, width=narrow, seeds=4), closed)
    err_wide = rel(mean_empirical_ntk(a, x, spec, width=wide, seeds=4), closed)
    assert err_wide < 0.08
    assert err_wide < err_narrow


def test_official_clamp_moves_the_ntk_away_from_the_finite_width_limit():
    a, x = small_graph(seed=1)
    spec = ArchSpec(arch="gcn")
    exact = ntk_from_spec(a, x, spec)
    compat = ntk_from_spec(a, x, dataclasses.replace(spec, official_compat=True))
    emp = mean_empirical_ntk(a, x, spec, width=4096, seeds=4)
    assert rel(compat, exact) > 0.01
    assert rel(emp, exact) < rel(emp, compat)


def test_official_clamp_formula():
    sigma = torch.tensor([[1.0, 1.5, 0.2], [1.5, 4.0, -0.5], [0.2, -0.5, 2.0]], dtype=torch.float64)
    _, _, used = arccos_expectations(sigma, official_compat=True)
    expected = sigma.clone()
    expected[0, 1] = expected[1, 0] = 1.0  # min(Sigma_00, Sigma_11)
    assert torch.equal(used, expected)
    _, _, untouched = arccos_expectations(sigma)
    assert torch.equal(untouched, sigma)


def test_explicit_formulas_depth_one():
    a, x = small_graph(seed=2)
    s = row_normalize(a)
    lin = ntk_matrix(a, x, arch="sgc")
    assert torch.allclose(lin, 2 * s @ s @ x @ x.T @ s.T @ s.T)
    sigma = s @ x @ x.T @ s.T
    e, ed, _ = arccos_expectations(sigma)
    assert torch.allclose(ntk_matrix(a, x, arch="gcn"), s @ (sigma * ed) @ s.T + s @ e @ s.T)
    sig_mlp = x @ x.T + 1
    e, ed, _ = arccos_expectations(sig_mlp)
    assert torch.allclose(ntk_matrix(a, x, arch="mlp"), sig_mlp * ed + e + 1)
    p = appnp_operator(a, 0.1)
    assert torch.allclose(ntk_matrix(a, x, arch="appnp"), p @ (sig_mlp * ed + e + 1) @ p.T)


def test_ntk_is_symmetric_psd_for_every_architecture():
    a, x = small_graph(n=10, seed=4)
    for kw in CASES:
        q = ntk_matrix(a, x, **kw)
        assert torch.equal(q, q.T)
        assert float(torch.linalg.eigvalsh(q)[0]) > -1e-9 * float(q.abs().max())


def test_operators():
    a, _ = small_graph(n=9, seed=5)
    assert torch.allclose(row_normalize(a).sum(1), torch.ones(9, dtype=torch.float64))
    s = sym_normalize(a)
    assert torch.allclose(s, s.T)
    assert float(torch.linalg.eigvalsh(s)[-1]) == pytest.approx(1.0, abs=1e-12)
    assert torch.equal(gin_operator(a), a + torch.eye(9, dtype=torch.float64))
    sage = sage_operator(a)
    deg = a.sum(1)
    expected = torch.where(deg[:, None] > 0, a / deg.clamp_min(1)[:, None], 0.0) + torch.eye(9, dtype=torch.float64)
    assert torch.allclose(sage, expected)
    assert torch.allclose(appnp_operator(a, 0.2, iterations=300), appnp_operator(a, 0.2, exact=True), atol=1e-12)
    assert torch.allclose(appnp_operator(a, 1.0), torch.eye(9, dtype=torch.float64))


def test_sparse_inputs_accepted():
    a, x = small_graph(seed=6)
    dense = ntk_matrix(a, x, arch="gcn")
    assert torch.allclose(ntk_matrix(sp.csr_matrix(a.numpy()), x.numpy(), arch="gcn"), dense)
    assert torch.allclose(ntk_matrix(a.to_sparse(), sp.csr_matrix(x.numpy()), arch="gcn"), dense)


def test_bad_input():
    a, x = small_graph()
    with pytest.raises(ValueError, match="square"):
        ntk_matrix(a[:, :5], x)
    asym = a.clone()
    asym[0, 1], asym[1, 0] = 1.0, 0.0
    with pytest.raises(ValueError, match="symmetric"):
        ntk_matrix(asym, x)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ntk_matrix(a, bad)
    with pytest.raises(ValueError, match="architecture"):
        ntk_matrix(a, x, arch="transformer")
    with pytest.raises(ValueError, match="linear"):
        ntk_matrix(a, x, arch="sgc", activation="relu")
    with pytest.raises(ValueError, match="depth"):
        ntk_matrix(a, x, depth=0)
    with pytest.raises(ValueError, match="skip"):
        ntk_matrix(a, x, arch="gin", skip="pc")
    with pytest.raises(ValueError, match="rows"):
        ntk_matrix(a, x[:3])
