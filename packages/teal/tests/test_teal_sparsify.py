"""TealLinear / apply_teal: all seven projections wrapped, exact no-op at sparsity 0, reversible, TEAL semantics."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr25.teal import (
    CalibrationConfig,
    SparsityPlan,
    TealLinear,
    apply_teal,
    calibrate,
    measure_realized_sparsity,
    model_wide_sparsity,
    projection_param_counts,
)
from iclr25.teal.config import PROJECTIONS

CFG = CalibrationConfig(num_bins=1000)


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def test_all_seven_projections_wrapped_and_sparsity_zero_is_exact(tiny_model, tiny_batches):
    calib = calibrate(tiny_model, tiny_batches, CFG)
    ids = tiny_batches[0]
    dense = _logits(tiny_model, ids)
    keys_before = set(tiny_model.state_dict())
    handle = apply_teal(tiny_model, calib, SparsityPlan.uniform(0.0))
    wrapped = [m for m in tiny_model.modules() if isinstance(m, TealLinear)]
    assert len(wrapped) == 7 * 2 and len(handle.wrappers) == 14
    for layer in tiny_model.model.layers:
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            assert isinstance(getattr(layer.self_attn, name), TealLinear)
        for name in ("gate_proj", "up_proj", "down_proj"):
            assert isinstance(getattr(layer.mlp, name), TealLinear)
    assert torch.equal(_logits(tiny_model, ids), dense)  # bit-exact no-op
    handle.set_plan(SparsityPlan.uniform(0.5))
    sparse = _logits(tiny_model, ids)
    assert not torch.allclose(sparse, dense)
    handle.remove()
    assert not any(isinstance(m, TealLinear) for m in tiny_model.modules())
    assert set(tiny_model.state_dict()) == keys_before
    assert all(p.is_contiguous() for p in tiny_model.parameters())
    assert torch.equal(_logits(tiny_model, ids), dense)  # exactly dense again


def test_prefill_modes(tiny_llama, tiny_batches):
    calib = calibrate(tiny_llama, tiny_batches, CFG)
    ids = tiny_batches[0]
    T = ids.shape[1]
    dense = _logits(tiny_llama, ids)
    out = {}
    for prefill in ("dense", "last_half", "all"):
        with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), prefill=prefill):
            out[prefill] = _logits(tiny_llama, ids)
    assert torch.equal(out["dense"], dense)
    keep = T - T // 2  # the first ceil(T/2) positions see only dense inputs (causal attention)
    assert torch.allclose(out["last_half"][:, :keep], dense[:, :keep], atol=1e-6)
    assert not torch.allclose(out["last_half"][:, keep:], dense[:, keep:], atol=1e-3)
    assert not torch.allclose(out["all"][:, :keep], dense[:, :keep], atol=1e-3)


def test_tealinear_matches_manual_threshold_and_decode_kernel():
    torch.manual_seed(0)
    lin = torch.nn.Linear(40, 24, bias=True)
    x = torch.randn(2, 6, 40)
    t = 0.7
    for prefill in ("all", "last_half"):
        w = TealLinear(torch.nn.Linear(40, 24), prefill=prefill, backend="reference")
        w.linear.load_state_dict(lin.state_dict())
        w.set_threshold(t)
        mask = x.abs() > t
        if prefill == "last_half":
            mask[:, :3] = True
        assert torch.allclose(w(x), F.linear(x * mask, lin.weight, lin.bias), atol=1e-6)
    tok = x[:1, :1]
    ref = F.linear(tok * (tok.abs() > t), lin.weight, lin.bias)
    for backend in ("reference", "torch", "auto"):
        w = TealLinear(torch.nn.Linear(40, 24), backend=backend)
        w.linear.load_state_dict(lin.state_dict())
        w.set_threshold(t)
        assert torch.allclose(w(tok), ref, atol=1e-5), backend
        if backend != "reference":
            assert w.linear.weight.stride(0) == 1  # column-major for column skipping


def test_thresholds_are_fixed_scalars_not_per_token_topk(tiny_llama, make_batches):
    calib = calibrate(tiny_llama, make_batches(), CFG)
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), mode="abs_quantile", prefill="all") as handle:
        before = handle.thresholds()
        q = handle.wrappers[(0, "q")]
        seen = []
        hook = q.register_forward_pre_hook(lambda m, a: seen.append(a[0]))
        _logits(tiny_llama, make_batches(n_batches=1, seed=5)[0])
        hook.remove()
        assert handle.thresholds() == before
        per_token = (seen[0].abs() <= q._t).float().mean(-1).reshape(-1)
        assert per_token.std() > 0.01  # a fixed threshold gives a different sparsity on each token


def test_realized_sparsity_on_calibration_data(tiny_llama, make_batches):
    batches = make_batches(n_batches=3)
    calib = calibrate(tiny_llama, batches, CalibrationConfig())
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.4), mode="abs_quantile"):
        realized = measure_realized_sparsity(tiny_llama, batches)
    n = sum(b.numel() for b in batches) * 32
    # layer-0 q/k/v inputs do not depend on earlier sparsification: exactly the calibration sample
    for p in ("q", "k", "v"):
        assert abs(realized[(0, p)] - 0.4) <= 1e-4 + 1 / n
    assert set(realized) == {(layer, p) for layer in range(2) for p in PROJECTIONS}


def test_model_wide_sparsity_is_parameter_weighted(tiny_llama):
    counts = projection_param_counts(tiny_llama)
    assert counts[(0, "q")] == 32 * 32 and counts[(0, "k")] == 16 * 32 and counts[(0, "down")] == 72 * 32
    plan = SparsityPlan({0: {"down": 0.9}, 1: {"k": 0.5}}, default=0.2)
    manual = sum(n * (0.9 if k == (0, "down") else 0.5 if k == (1, "k") else 0.2) for k, n in counts.items())
    assert plan.effective_sparsity(counts) == pytest.approx(manual / sum(counts.values()))
    levels = {k: plan.sparsity(*k) for k in counts}
    assert model_wide_sparsity(levels, tiny_llama) == pytest.approx(plan.effective_sparsity(counts))
    assert SparsityPlan.uniform(0.3).effective_sparsity(counts) == pytest.approx(0.3)


def test_bad_input(tiny_llama, tiny_batches):
    calib = calibrate(tiny_llama, tiny_batches, CFG)
    for bad in (1.0, -0.1, 2):
        with pytest.raises(ValueError, match=r"\[0, 1\)"):
            SparsityPlan.uniform(bad)
    with pytest.raises(ValueError, match="unknown projections"):
        SparsityPlan({0: {"qkv": 0.5}})
    with pytest.raises(ValueError, match="Llama-style"):
        apply_teal(torch.nn.Sequential(torch.nn.Linear(2, 2)), calib, SparsityPlan.uniform(0.5))
    with pytest.raises(ValueError, match="prefill"):
        apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), prefill="half")
    assert not any(isinstance(m, TealLinear) for m in tiny_llama.modules())
    handle = apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5))
    with pytest.raises(ValueError, match="already applied"):
        apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5))
    with pytest.raises(ValueError, match="remove the TEAL wrappers"):
        calibrate(tiny_llama, tiny_batches)
    handle.remove()
    handle.remove()  # idempotent
    with pytest.raises(ValueError, match="needs a model with TEAL applied"):
        measure_realized_sparsity(tiny_llama, tiny_batches)


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
def test_decode_with_kv_cache_uses_thresholds(tiny_llama, tiny_batches):
    """Incremental decoding (one token at a time) equals the all-positions sparsified forward pass."""
    calib = calibrate(tiny_llama, tiny_batches, CFG)
    ids = tiny_batches[0][:1, :10]
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), prefill="all", backend="torch"):
        full = _logits(tiny_llama, ids)
        with torch.no_grad():
            out = tiny_llama(input_ids=ids[:, :1], use_cache=True)
            steps = [out.logits]
            for i in range(1, ids.shape[1]):
                out = tiny_llama(input_ids=ids[:, i : i + 1], past_key_values=out.past_key_values, use_cache=True)
                steps.append(out.logits)
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-4)


@pytest.mark.triton
def test_tealinear_decode_through_the_triton_kernel():
    torch.manual_seed(1)
    lin = torch.nn.Linear(70, 45)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    w = TealLinear(torch.nn.Linear(70, 45), backend="triton").to(device)
    w.linear.load_state_dict(lin.state_dict())
    w.set_threshold(0.5)
    tok = torch.randn(1, 1, 70, device=device)
    assert w._decode_backend(tok) == "triton"
    ref = F.linear(tok * (tok.abs() > 0.5), lin.weight.to(device), lin.bias.to(device))
    assert torch.allclose(w(tok), ref, atol=1e-5)
