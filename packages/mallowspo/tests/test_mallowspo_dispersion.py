"""Dispersion estimator: known entropies, one-token shift, masking, modes, clamping, no gradient."""

import math
import warnings

import pytest
import torch

from iclr25.mallowspo import mallows_theta_loss, neg_log_dispersion, sequence_entropy, sequence_logps, token_entropy

V = 16


def _logits_uniform_over(k: int) -> torch.Tensor:
    row = torch.full((V,), -1e4)
    row[:k] = 0.0
    return row


def test_known_entropies_with_shift_and_mask():
    # sequence of length 5: prompt tokens at 0..1, completion at 2..3, padding at 4
    labels = torch.tensor([[-100, -100, 7, 3, -100]])
    logits = torch.zeros(1, 5, V)
    # position t predicts token t+1: positions 1 and 2 predict the completion tokens 2 and 3
    logits[0, 0] = _logits_uniform_over(1)  # predicts a prompt token: ignored
    logits[0, 1] = _logits_uniform_over(4)
    logits[0, 2] = _logits_uniform_over(8)
    logits[0, 3] = _logits_uniform_over(2)  # predicts padding: ignored
    logits[0, 4] = _logits_uniform_over(16)  # last position predicts nothing
    h = sequence_entropy(logits, labels)
    expected = (math.log(4) + math.log(8)) / (2 * math.log(V))
    assert h.item() == pytest.approx(expected, abs=1e-6)
    with pytest.warns(UserWarning, match="literal"):
        h_sum = sequence_entropy(logits, labels, mode="sum")
    assert h_sum.item() == pytest.approx(2 * expected, abs=1e-6)
    # ln V from a declared vocabulary: only the first 8 logits are real tokens
    h8 = sequence_entropy(logits, labels, vocab_size=8)
    assert h8.item() == pytest.approx((math.log(4) + math.log(8)) / (2 * math.log(8)), abs=1e-6)


def test_full_vocabulary_entropy_not_label_surprisal():
    # the label is very likely but the tail is flat: surprisal is small, the entropy is not
    logits = torch.zeros(1, 3, V)
    logits[0, :, 5] = 3.0
    labels = torch.tensor([[-100, 5, 5]])
    h = sequence_entropy(logits, labels).item()
    p = torch.softmax(logits[0, 0], -1)
    ent = -(p * p.log()).sum().item() / math.log(V)
    surprisal = -math.log(p[5].item()) / math.log(V)
    assert h == pytest.approx(ent, abs=1e-6)
    assert abs(h - surprisal) > 0.1


def test_uniform_reference_gives_zero_scale_and_log2_loss():
    logits = torch.zeros(2, 6, V)
    labels = torch.tensor([[-100, -100, 1, 2, 3, -100], [-100, 4, 4, 4, 4, 4]])
    h = sequence_entropy(logits, labels)
    assert torch.allclose(h, torch.ones(2))
    c = neg_log_dispersion(h, h)
    assert torch.allclose(c, torch.zeros(2), atol=1e-7)
    loss = mallows_theta_loss(torch.randn(2), torch.randn(2), torch.randn(2), torch.randn(2), c, beta=5.0)
    assert loss.item() == pytest.approx(math.log(2), abs=1e-6)


def test_clamp_and_average():
    c = neg_log_dispersion(torch.tensor([0.0, 0.2]), torch.tensor([0.0, 0.6]), phi_star=0.29, eps=1e-6)
    assert c[0].item() == pytest.approx(-0.29 * math.log(1e-6))
    assert c[1].item() == pytest.approx(-0.29 * math.log(0.4))
    with pytest.warns(UserWarning, match="negative"):
        neg_log_dispersion(torch.tensor([1.5]))
    with pytest.raises(ValueError, match="phi_star"):
        neg_log_dispersion(torch.tensor([0.5]), phi_star=0.0)


def test_no_gradient_through_the_dispersion():
    ref_logits = torch.randn(2, 5, V, requires_grad=True)
    labels = torch.tensor([[-100, 1, 2, 3, -100], [-100, -100, 5, 6, 7]])
    h = sequence_entropy(ref_logits, labels)
    assert not h.requires_grad
    c = neg_log_dispersion(h[:1], h[1:])
    assert not c.requires_grad
    pol_logits = torch.randn(2, 5, V, requires_grad=True)
    logps = sequence_logps(pol_logits, labels)
    loss = mallows_theta_loss(logps[:1], logps[1:], torch.zeros(1), torch.zeros(1), c, beta=1.0)
    loss.backward()
    assert ref_logits.grad is None
    assert pol_logits.grad is not None and pol_logits.grad.abs().sum() > 0


def test_sequence_logps_shift_mask_and_length_norm():
    logits = torch.randn(2, 6, V)
    labels = torch.tensor([[-100, -100, 3, 4, 5, -100], [-100, 1, 2, -100, -100, -100]])
    lp = torch.log_softmax(logits, -1)
    manual0 = lp[0, 1, 3] + lp[0, 2, 4] + lp[0, 3, 5]
    manual1 = lp[1, 0, 1] + lp[1, 1, 2]
    out = sequence_logps(logits, labels)
    assert torch.allclose(out, torch.stack([manual0, manual1]), atol=1e-6)
    norm = sequence_logps(logits, labels, length_normalize=True)
    assert torch.allclose(norm, torch.stack([manual0 / 3, manual1 / 2]), atol=1e-6)


def test_token_entropy_chunked_equals_naive():
    x = torch.randn(7, 5, 33)
    assert torch.allclose(token_entropy(x), token_entropy(x, chunk_size=3), atol=1e-6)
    with pytest.raises(ValueError, match="chunk_size"):
        token_entropy(x, chunk_size=0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="mode"):
        sequence_entropy(torch.randn(1, 3, V), torch.zeros(1, 3, dtype=torch.long), mode="max")
    with pytest.raises(ValueError, match="labels"):
        sequence_entropy(torch.randn(1, 3, V), torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size"):
        sequence_entropy(torch.randn(1, 3, V), torch.zeros(1, 3, dtype=torch.long), vocab_size=V + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sequence_entropy(torch.randn(1, 3, V), torch.zeros(1, 3, dtype=torch.long))  # mean mode: no warning
