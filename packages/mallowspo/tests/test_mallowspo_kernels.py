"""Triton kernels against their torch references (interpreted on CPU): odd V, ignore_index, -inf logits, bf16."""

import pytest
import torch

from iclr25.mallowspo.kernels import (
    fused_logp_entropy_reference,
    fused_selective_logp_reference,
    logp_entropy,
    selective_logp,
)
from iclr25.shared.testing import KernelConformance, assert_close_ratio

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # Triton runs natively on CUDA, interpreted on CPU


def _inputs(shape, dtype, device, requires_grad=False, seed=0):
    n, v = shape
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, v, generator=g) * 3).to(dtype)
    labels = torch.randint(0, v, (n,), generator=g)
    if n > 2:
        labels[1] = -100  # ignored row
        logits[2, : max(1, v // 3)] = float("-inf")  # masked vocabulary entries
        labels[2] = v - 1  # a finite entry
    logits = logits.to(device)
    if requires_grad:
        logits.requires_grad_(True)
    return logits, labels.to(device)


class TestSelectiveLogp(KernelConformance):
    shapes = [(1, 7), (5, 7), (6, 1000), (3, 4099)]
    dtypes = (torch.float32, torch.bfloat16)
    differentiable = True
    grad_argnums = (0,)
    tolerances = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2)}

    def make_inputs(self, shape, dtype, device):
        return _inputs(shape, dtype, device, requires_grad=True)

    def reference(self, logits, labels):
        return fused_selective_logp_reference(logits, labels)

    def kernel(self, logits, labels):
        return selective_logp(logits, labels, backend="triton")

    def dispatch(self, logits, labels):
        return selective_logp(logits, labels)


class TestLogpEntropy(KernelConformance):
    shapes = [(1, 7), (5, 7), (6, 1000), (3, 4099)]
    dtypes = (torch.float32, torch.bfloat16)
    differentiable = False
    tolerances = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1e-4, 1e-4)}

    def make_inputs(self, shape, dtype, device):
        return _inputs(shape, dtype, device)

    def reference(self, logits, labels):
        return fused_logp_entropy_reference(logits, labels)

    def kernel(self, logits, labels):
        return logp_entropy(logits, labels, backend="triton")

    def dispatch(self, logits, labels):
        return logp_entropy(logits, labels)


@pytest.mark.triton
def test_logp_entropy_gpt2_vocab_and_3d_shapes():
    logits, labels = _inputs((3, 50257), torch.float32, DEV, seed=3)
    ref = fused_logp_entropy_reference(logits, labels)
    out = logp_entropy(logits, labels, backend="triton")
    for r, o in zip(ref, out):
        assert_close_ratio(r, o, ratio=1e-5, atol=2e-5)
    # [B, T, V] input and a row whose largest logits sit in the last, partial block
    x = torch.randn(2, 3, 37, device=DEV)
    x[0, 1, -1] = 40.0
    y = torch.randint(0, 37, (2, 3), device=DEV)
    y[1, 2] = -100
    for r, o in zip(fused_logp_entropy_reference(x, y), logp_entropy(x, y, backend="triton")):
        assert o.shape == (2, 3)
        assert_close_ratio(r, o, ratio=1e-5, atol=1e-5)


@pytest.mark.triton
def test_kernels_against_trl_utilities():
    trl_utils = pytest.importorskip("trl.trainer.utils")
    entropy_from_logits, selective_log_softmax = trl_utils.entropy_from_logits, trl_utils.selective_log_softmax

    x = torch.randn(4, 9, 301, device=DEV)
    y = torch.randint(0, 301, (4, 9), device=DEV)
    logp, ent = logp_entropy(x, y, backend="triton")
    assert torch.allclose(logp, selective_log_softmax(x, y), atol=1e-5)
    assert torch.allclose(ent, entropy_from_logits(x), atol=1e-5)


@pytest.mark.triton
def test_known_entropies_and_label_on_minus_inf():
    v = 11
    x = torch.full((3, v), float("-inf"), device=DEV)
    x[0] = 0.0  # uniform over V
    x[1, :4] = 2.5  # uniform over 4 entries
    x[2, 5] = 1.0  # deterministic
    y = torch.tensor([3, 9, 5], device=DEV)  # row 1's label has probability 0
    logp, ent = logp_entropy(x, y, backend="triton")
    expected = torch.log(torch.tensor([float(v), 4.0, 1.0], device=DEV))
    assert torch.allclose(ent, expected, atol=1e-6)
    assert logp[0].item() == pytest.approx(-torch.log(torch.tensor(float(v))).item(), abs=1e-6)
    assert logp[1].item() == float("-inf")
    assert logp[2].item() == pytest.approx(0.0, abs=1e-7)


def test_torch_path_is_row_chunked(monkeypatch):
    import iclr25.mallowspo.kernels as K

    x = torch.randn(4, 5, 301)
    y = torch.randint(0, 301, (4, 5))
    y[0, 0] = -100
    full = fused_logp_entropy_reference(x, y)
    monkeypatch.setattr(K, "TORCH_CHUNK_ELEMENTS", 3 * 301)  # 3 rows per chunk, 7 chunks
    out = K.logp_entropy(x, y, backend="torch")
    for r, o in zip(full, out):
        assert o.shape == (4, 5)
        assert torch.allclose(r, o, atol=1e-6)


def test_dispatch_validates_inputs():
    with pytest.raises(ValueError, match="labels shape"):
        logp_entropy(torch.randn(3, 5), torch.zeros(4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        selective_logp(torch.randn(3, 5), torch.zeros(3))
    with pytest.raises(ValueError, match="backend"):
        selective_logp(torch.randn(3, 5), torch.zeros(3, dtype=torch.long), backend="cuda")
