"""Loss oracles: DPO worked example, reduction to DPO, TRL's CPO/SimPO loss, IPO conventions, the ϕ link."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from iclr25.mallowspo import (
    dpo_loss,
    mallows_ipo_loss,
    mallows_phi_loss,
    mallows_theta_loss,
    neg_log_dispersion,
    pairwise_prob_phi,
)


def _example():
    return [torch.tensor([v], dtype=torch.float64) for v in (-10.0, -12.0, -11.0, -11.5)]


def test_dpo_worked_example():
    pc, pr, rc, rr = _example()
    assert dpo_loss(pc, pr, rc, rr, beta=0.1).item() == pytest.approx(0.620957047789532, abs=1e-12)


def test_mallows_theta_worked_example_with_entropy_scale():
    pc, pr, rc, rr = _example()
    c = neg_log_dispersion(torch.tensor([0.5]), torch.tensor([0.5]), phi_star=0.29)
    assert c.item() == pytest.approx(0.2010127, abs=1e-7)
    assert mallows_theta_loss(pc, pr, rc, rr, c, beta=0.1).item() == pytest.approx(0.6781849, abs=1e-6)


def test_constant_scale_one_is_exactly_dpo():
    g = torch.Generator().manual_seed(0)
    x = [torch.randn(17, generator=g) * 5 for _ in range(4)]
    for eps in (0.0, 0.2):
        a = mallows_theta_loss(*x, torch.ones(17), beta=0.3, label_smoothing=eps, reduction="none")
        b = dpo_loss(*x, beta=0.3, label_smoothing=eps, reduction="none")
        assert torch.equal(a, b)
        # TRL's sigmoid formula written out (trl.DPOTrainer._compute_loss, loss_type="sigmoid")
        delta = (x[0] - x[2]) - (x[1] - x[3])
        trl = -F.logsigmoid(0.3 * delta) * (1 - eps) - F.logsigmoid(-0.3 * delta) * eps
        assert torch.allclose(a, trl, atol=1e-6)


def test_simpo_plugin_equals_trl_cpo_simpo():
    CPOTrainer = pytest.importorskip("trl.experimental.cpo.cpo_trainer").CPOTrainer

    g = torch.Generator().manual_seed(1)
    pc, pr = torch.randn(9, generator=g) - 2, torch.randn(9, generator=g) - 2  # averaged log-probs
    beta, gamma = 2.0, 0.5
    fake = SimpleNamespace(
        alpha=0.0,
        loss_type="simpo",
        simpo_gamma=gamma,
        beta=beta,
        label_smoothing=0.0,
        accelerator=SimpleNamespace(device=torch.device("cpu")),
    )
    trl_losses, _, _ = CPOTrainer.cpo_loss(fake, pc, pr)
    ours = mallows_theta_loss(
        pc, pr, None, None, 1.0, beta=beta, home_advantage=gamma / beta, reference_free=True, reduction="none"
    )
    assert torch.allclose(ours, trl_losses, atol=1e-6)


def test_mixing_alpha_and_reference_free():
    pc, pr, rc, rr = _example()
    a = mallows_theta_loss(pc, pr, rc, rr, 1.0, beta=1.0, mixing_alpha=0.25, home_advantage=0.4)
    z = (pc - pr) - 0.25 * (rc - rr) - 0.75 * 0.4
    assert a.item() == pytest.approx(-F.logsigmoid(z).item(), abs=1e-12)
    b = mallows_theta_loss(pc, pr, rc, rr, 1.0, beta=1.0, reference_free=True)
    assert b.item() == pytest.approx(-F.logsigmoid(pc - pr).item(), abs=1e-12)


def test_ipo_conventions():
    g = torch.Generator().manual_seed(2)
    x = [torch.randn(8, generator=g, dtype=torch.float64) for _ in range(4)]
    c = torch.rand(8, generator=g, dtype=torch.float64) + 0.5
    off = mallows_ipo_loss(*x, c, beta=0.3, reduction="none")
    rb = mallows_ipo_loss(*x, c, beta=0.3, convention="rainbow", reduction="none")
    assert torch.allclose(rb, 0.09 * off, atol=1e-12)
    delta = (x[0] - x[1]) - (x[2] - x[3])
    assert torch.allclose(off, (c * delta - 1 / 0.6) ** 2)


def test_phi_loss_is_the_mallows_phi_law():
    pc = torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    pr = torch.tensor([-1.0, -2.0, -3.0, 1.0], dtype=torch.float64)
    zero = torch.zeros(4, dtype=torch.float64)
    loss = mallows_phi_loss(pc, pr, zero, zero, 0.5, beta=1.0, reduction="none")
    expected = -torch.log(torch.tensor([pairwise_prob_phi(d, 0.5) for d in (1, 2, 3)] + [1 - 1 / 1.5]))
    assert torch.allclose(loss, expected.to(loss.dtype), atol=1e-12)
    # at a tie the right limit: -log g(0+) = -log(1/(1-ϕ) + 1/log ϕ); a finite gradient everywhere
    pc2 = torch.tensor([0.0, 1e-6, 5.0, -40.0], requires_grad=True)
    loss2 = mallows_phi_loss(pc2, torch.zeros(4), torch.zeros(4), torch.zeros(4), 0.3, beta=1.0, reduction="none")
    assert loss2[0].item() == pytest.approx(-math.log(1 / 0.7 + 1 / math.log(0.3)), abs=1e-6)
    loss2.sum().backward()
    assert torch.isfinite(pc2.grad).all()
    assert loss2.dtype == torch.float32


@pytest.mark.parametrize("phi", [0.05, 0.3, 0.5, 0.9])
def test_phi_loss_gradient_at_reference_is_the_right_limit(phi):
    # policy = reference: Δ = 0. Oracle: the one-sided slope of -log g_ϕ at 0+ from the naive closed form
    # g(s) = (s+1)/(1-ϕ^(s+1)) - s/(1-ϕ^s) in 60-digit arithmetic (mpmath), independent of the package's formulas.
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    p = mp.mpf(phi)

    def g(s):
        return (s + 1) / (1 - p ** (s + 1)) - s / (1 - p**s)

    h = mp.mpf("1e-25")
    g0 = g(h)
    slope = (mp.log(g(2 * h)) - mp.log(g(h))) / h  # d/ds log g at 0+, error O(h)
    beta = 0.7
    pc = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    pr = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    ref = torch.full((3,), -2.0, dtype=torch.float64)
    loss = mallows_phi_loss(pc, pr, ref, ref, phi, beta=beta, reduction="sum")
    loss.backward()
    assert loss.item() / 3 == pytest.approx(float(-mp.log(g0)), abs=1e-12)
    assert torch.allclose(pc.grad, torch.full((3,), -beta * float(slope), dtype=torch.float64), atol=1e-10)
    assert torch.allclose(pr.grad, -pc.grad)
    assert (pc.grad < 0).all()  # descent raises the chosen log-prob
    # continuity from the right: the loss just above 0 agrees with value + slope
    eps = 1e-7
    right = mallows_phi_loss(
        torch.tensor([eps / beta], dtype=torch.float64),
        torch.zeros(1, dtype=torch.float64),
        torch.zeros(1, dtype=torch.float64),
        torch.zeros(1, dtype=torch.float64),
        phi,
        beta=beta,
    )
    assert right.item() == pytest.approx(float(-mp.log(g(mp.mpf(eps)))), abs=1e-12)


def test_phi_at_zero_closed_forms():
    from iclr25.mallowspo.mallows import g_phi_at_zero

    assert g_phi_at_zero(0.5)[0] == pytest.approx(1 / 0.5 + 1 / math.log(0.5), abs=1e-15)
    assert g_phi_at_zero(0.5)[1] == pytest.approx((0.5 + 0.5 * math.log(0.5)) / 0.25 - 0.5, abs=1e-15)
    assert g_phi_at_zero(1.0) == (0.5, 0.0)  # uniform: no information, no gradient
    with pytest.raises(ValueError, match="phi"):
        g_phi_at_zero(float("nan"))


def test_no_gradient_flows_into_the_scale():
    pc = torch.tensor([-3.0, -1.0], requires_grad=True)
    pr = torch.tensor([-4.0, -0.5], requires_grad=True)
    c = torch.tensor([0.7, 1.9], requires_grad=True)
    loss = mallows_theta_loss(pc, pr, torch.zeros(2), torch.zeros(2), c, beta=0.5, reduction="sum")
    loss.backward()
    assert c.grad is None
    # analytic policy gradient: d/dpc -log σ(β c Δ) = -β c σ(-β c Δ)
    z = 0.5 * c.detach() * (pc.detach() - pr.detach())
    assert torch.allclose(pc.grad, -0.5 * c.detach() * torch.sigmoid(-z), atol=1e-7)


def test_reductions_and_errors():
    x = [torch.randn(5) for _ in range(4)]
    per = mallows_theta_loss(*x, 0.8, reduction="none")
    assert per.shape == (5,)
    assert mallows_theta_loss(*x, 0.8).item() == pytest.approx(per.mean().item())
    assert mallows_theta_loss(*x, 0.8, reduction="sum").item() == pytest.approx(per.sum().item(), rel=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        mallows_theta_loss(*x, 0.8, reduction="avg")
    with pytest.raises(ValueError, match="beta"):
        mallows_theta_loss(*x, 0.8, beta=0.0)
    with pytest.raises(ValueError, match="shape"):
        mallows_theta_loss(*x, torch.ones(3))
    with pytest.raises(ValueError, match="ref_chosen"):
        mallows_theta_loss(x[0], x[1], None, None, 1.0)
    with pytest.raises(TypeError):
        mallows_theta_loss([1.0], x[1], x[2], x[3], 1.0)
    with pytest.raises(ValueError, match="phi"):
        mallows_phi_loss(*x, 1.5)
    with pytest.raises(ValueError, match="phi"):
        mallows_phi_loss(*x, float("nan"))
    with pytest.raises(ValueError, match="phi"):
        mallows_phi_loss(*x, torch.tensor([0.5, 0.5, float("nan"), 0.5, 0.5]))
    for bad in (float("nan"), -0.1, torch.tensor([1.0, 1.0, -1.0, 1.0, 1.0]), float("inf")):
        with pytest.raises(ValueError, match="finite and >= 0"):
            mallows_theta_loss(*x, bad)
        with pytest.raises(ValueError, match="finite and >= 0"):
            mallows_ipo_loss(*x, bad)
    empty = [torch.zeros(0) for _ in range(4)]
    for fn in (mallows_theta_loss, mallows_ipo_loss):
        with pytest.raises(ValueError, match="empty batch"):
            fn(*empty, 1.0)
    with pytest.raises(ValueError, match="empty batch"):
        mallows_phi_loss(*empty, 0.5)
    with pytest.raises(ValueError, match="convention"):
        mallows_ipo_loss(*x, 1.0, convention="x")
