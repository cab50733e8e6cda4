"""Group DRO loss (Sagawa et al.) against the reference formula; metrics."""

import numpy as np
import pytest
import torch

from iclr25.mixmax import GroupDROLoss
from iclr25.mixmax.metrics import group_accuracy, group_log_loss, worst_group_accuracy, worst_group_log_loss


def _reference_step(q, losses, groups, G, step, adj, counts, normalize):
    group_loss = np.array([losses[groups == g].mean() if np.any(groups == g) else 0.0 for g in range(G)])
    adjusted = group_loss + adj / np.sqrt(counts)
    if normalize:
        adjusted = adjusted / adjusted.sum()
    q = q * np.exp(step * adjusted)
    q = q / q.sum()
    return q, float(group_loss @ q)


@pytest.mark.parametrize("normalize", [False, True])
def test_group_dro_step_matches_formula(normalize):
    G = 4
    rng = np.random.default_rng(0)
    counts = np.array([100.0, 50.0, 10.0, 5.0])
    loss_fn = GroupDROLoss(G, step_size=0.3, adjustment=2.0, group_counts=counts, normalize_loss=normalize)
    q = np.full(G, 0.25)
    for _ in range(3):
        losses = rng.random(12)
        groups = rng.integers(0, 3, size=12)  # group 3 absent from the batches: loss 0
        q, robust = _reference_step(q, losses, groups, G, 0.3, 2.0, counts, normalize)
        out = loss_fn(torch.tensor(losses), torch.tensor(groups))
        assert out.item() == pytest.approx(robust, rel=1e-6)
        np.testing.assert_allclose(loss_fn.adv_probs.numpy(), q, rtol=1e-6)


def test_group_dro_gradient_and_eval_mode():
    loss_fn = GroupDROLoss(2, step_size=1.0)
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    losses = w[[0, 0, 1]] ** 2
    out = loss_fn(losses, torch.tensor([0, 0, 1]))
    out.backward()
    q = loss_fn.adv_probs
    np.testing.assert_allclose(w.grad.numpy(), [2 * q[0].item(), 4 * q[1].item()], rtol=1e-6)
    loss_fn.eval()
    before = loss_fn.adv_probs.clone()
    loss_fn(torch.tensor([5.0]), torch.tensor([1]))
    assert torch.equal(before, loss_fn.adv_probs)
    assert loss_fn.n_updates.item() == 1 and torch.allclose(loss_fn.avg_probs, before)


def test_group_dro_trains_toward_worst_group():
    """On two groups wanting different constants, the robust solution equalises the losses."""
    torch.manual_seed(0)
    theta = torch.zeros(1, requires_grad=True)
    targets = torch.tensor([0.0] * 30 + [3.0] * 10)
    groups = torch.tensor([0] * 30 + [1] * 10)
    loss_fn = GroupDROLoss(2, step_size=0.1)
    opt = torch.optim.SGD([theta], lr=0.1)
    for _ in range(600):
        opt.zero_grad()
        loss_fn((theta - targets) ** 2, groups).backward()
        opt.step()
    assert theta.item() == pytest.approx(1.5, abs=0.1)  # ERM would give 0.75


def test_group_dro_errors():
    with pytest.raises(ValueError, match="group_counts"):
        GroupDROLoss(2, adjustment=1.0)
    with pytest.raises(ValueError, match="codes"):
        GroupDROLoss(2)(torch.ones(2), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="equal length"):
        GroupDROLoss(2)(torch.ones(2), torch.tensor([0]))


def test_metrics():
    y = np.array([0, 1, 1, 0, 1])
    pred = np.array([0, 1, 0, 0, 0])
    g = np.array(["a", "a", "b", "b", "b"])
    assert group_accuracy(y, pred, g) == {"a": 1.0, "b": pytest.approx(1 / 3)}
    assert worst_group_accuracy(y, pred, g) == pytest.approx(1 / 3)
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [0.6, 0.4], [0.7, 0.3]])
    ll = group_log_loss(y, proba, g)
    assert ll["a"] == pytest.approx(-(np.log(0.9) + np.log(0.8)) / 2)
    assert worst_group_log_loss(y, proba, g) == pytest.approx(-(np.log(0.5) + np.log(0.6) + np.log(0.3)) / 3)
    with pytest.raises(ValueError, match="class codes"):
        group_log_loss(np.array([0, 2, 1, 0, 1]), proba, g)


def test_group_dro_checkpoint_resume():
    a = GroupDROLoss(3, step_size=0.5)
    rng = np.random.default_rng(0)
    batches = [(torch.tensor(rng.random(9)), torch.tensor(rng.integers(0, 3, 9))) for _ in range(4)]
    for losses, groups in batches[:2]:
        a(losses, groups)
    b = GroupDROLoss(3, step_size=0.5)
    b.load_state_dict(a.state_dict())
    for losses, groups in batches[2:]:
        assert a(losses, groups).item() == b(losses, groups).item()
    assert torch.equal(a.adv_probs, b.adv_probs) and torch.equal(a.avg_probs, b.avg_probs)


def test_group_dro_rejects_nan_losses_and_float_groups():
    from iclr25.mixmax import GroupDROLoss

    loss = GroupDROLoss(3)
    with pytest.raises(ValueError, match="NaN.*index 1"):
        loss(torch.tensor([0.1, float("nan")]), torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer tensor"):
        loss(torch.tensor([0.1, 0.2]), torch.tensor([0.0, 1.0]))
    assert torch.equal(loss.adv_probs, torch.full((3,), 1 / 3))  # nothing was updated by the rejected calls
