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
        assert w.weight.is_contiguous() and w.linear.weight is w.weight  # F.linear keeps the row-major weight
        if backend == "torch":  # the column-skipping kernel reads a separate column-major copy
            assert w._cm.stride(0) == 1 and torch.equal(w._cm, w.weight)
            assert w.extra_bytes == w.weight.numel() * 4
        else:
            assert w._cm is None and w.extra_bytes == 0


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
    assert w.decode_backend(tok.device) == "triton"
    ref = F.linear(tok * (tok.abs() > 0.5), lin.weight.to(device), lin.bias.to(device))
    assert torch.allclose(w(tok), ref, atol=1e-5)


# -- layout and decode policy ----------------------------------------------------------------------------------------
def _record_calls(monkeypatch):
    """Spy on F.linear (weight contiguity) and on the decode dispatcher (which inputs reach it)."""
    from iclr25.teal import kernels

    linear_weights, decoded = [], []
    real_linear, real_gemv = F.linear, kernels.sparse_gemv

    def linear(x, weight, bias=None):
        linear_weights.append(weight)
        return real_linear(x, weight, bias)

    def gemv(x, weight, threshold, **kw):
        decoded.append(tuple(x.shape))
        return real_gemv(x, weight, threshold, **kw)

    monkeypatch.setattr(F, "linear", linear)
    monkeypatch.setattr(kernels, "sparse_gemv", gemv)
    return linear_weights, decoded


def test_multi_token_forwards_use_the_row_major_weight(tiny_llama, tiny_batches, monkeypatch):
    calib = calibrate(tiny_llama, tiny_batches, CFG)
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), backend="torch") as handle:
        assert handle.extra_bytes() == sum(w.weight.numel() * 4 for w in handle.wrappers.values())
        weights, decoded = _record_calls(monkeypatch)
        _logits(tiny_llama, tiny_batches[0])  # prefill / evaluation, batch 4
        assert decoded == []  # no multi-token input reaches the decode kernel
        proj = [w for w in weights if w.shape in {(32, 32), (16, 32), (72, 32), (32, 72)}]
        assert len(proj) == 2 * 7 and all(w.is_contiguous() for w in proj)  # row-major for every F.linear


def test_decode_kernel_only_for_a_single_token(monkeypatch):
    torch.manual_seed(2)
    w = TealLinear(torch.nn.Linear(40, 24), 0.7, prefill="dense", backend="torch")
    ref = torch.nn.Linear(40, 24)
    ref.load_state_dict({"weight": w.weight.detach(), "bias": w.bias.detach()})
    _, decoded = _record_calls(monkeypatch)
    x = torch.randn(5, 40)  # [T, d]: prefill, dense under prefill="dense" (the old code sparsified it)
    assert torch.equal(w(x), ref(x)) and decoded == []
    one = x[:1]  # [1, d]: one token -> decode kernel, sparsified
    assert torch.allclose(w(one), ref(one * (one.abs() > 0.7)), atol=1e-5) and decoded == [(1, 40)]
    steps = torch.randn(3, 1, 40)  # a decode step of batch 3: sparsified, through F.linear (no decode kernel)
    assert torch.allclose(w(steps), ref(steps * (steps.abs() > 0.7)), atol=1e-6) and decoded == [(1, 40)]
    w.prefill = "last_half"
    mask = x.abs() > 0.7
    mask[:3] = True  # [T, d] follows the prefill policy along T: the first ceil(5/2) positions stay dense
    assert torch.allclose(w(x), ref(x * mask), atol=1e-6)


def test_decode_copy_follows_weight_changes():
    lin = torch.nn.Linear(30, 20)
    w = TealLinear(lin, 0.5, backend="torch")
    tok = torch.randn(30)
    with torch.no_grad():
        lin.weight.mul_(2)  # in place: the column-major copy must not go stale
    assert torch.allclose(w(tok), F.linear(tok * (tok.abs() > 0.5), lin.weight, lin.bias), atol=1e-5)


def test_nan_activation_propagates_through_every_path(tiny_llama, tiny_batches):
    lin = torch.nn.Linear(32, 16)
    x = torch.randn(1, 1, 32)
    x[..., 5] = float("nan")
    for backend in ("reference", "torch", "auto"):
        for prefill in ("dense", "all", "last_half"):
            out = TealLinear(lin, 0.4, backend=backend, prefill=prefill)(x)
            assert torch.isnan(out).all(), (backend, prefill)
    out = TealLinear(lin, 0.4, quantize="int8")(x)
    assert torch.isnan(out).all()


# -- calibrations and plans bound to their model ------------------------------------------------------------------------
def test_calibration_from_another_model_is_refused(tiny_llama, tiny_batches, tmp_path):
    from iclr25.teal import CalibrationResult, model_fingerprint
    from iclr25.teal.small_model import build_model

    from .conftest import TINY

    calib = calibrate(tiny_llama, tiny_batches, CFG)
    fp = model_fingerprint(tiny_llama)
    assert calib.fingerprint == fp and fp["num_layers"] == 2 and fp["hidden_size"] == 32
    assert fp["projections"]["1.down"] == [32, 72] and fp["projections"]["0.k"] == [16, 32]
    calib.save(tmp_path / "c.pt")
    assert CalibrationResult.load(tmp_path / "c.pt").fingerprint == fp
    import dataclasses

    wider = build_model("llama", dataclasses.replace(TINY, intermediate_size=80), seed=0)
    deeper = build_model("llama", dataclasses.replace(TINY, num_hidden_layers=3), seed=0)
    for other, what in ((wider, "gate"), (deeper, "num_layers")):
        with pytest.raises(ValueError, match=f"different model.*{what}"):
            apply_teal(other, calib, SparsityPlan.uniform(0.5))
        assert not any(isinstance(m, TealLinear) for m in other.modules())
    apply_teal(build_model("mistral", TINY, seed=1), calib, SparsityPlan.uniform(0.5)).remove()  # same shapes: fine


def test_plan_naming_missing_layers_is_refused(tiny_llama, tiny_batches):
    calib = calibrate(tiny_llama, tiny_batches, CFG)
    with pytest.raises(ValueError, match=r"names layers \[2, 7\] but the model has 2 layers"):
        apply_teal(tiny_llama, calib, SparsityPlan({2: {"q": 0.5}, 7: {"k": 0.1}}))
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5)) as handle:
        with pytest.raises(ValueError, match="names layers"):
            handle.set_plan(SparsityPlan({-1: {"q": 0.5}}))
        with pytest.raises(ValueError, match="no projection 'qkv'"):
            handle.set_layer_levels(0, {"qkv": 0.5})


def test_out_of_vocabulary_token_ids_are_refused(tiny_llama, tiny_batches):
    bad = tiny_batches[0].clone()
    bad[0, 3] = 64  # vocab_size = 64
    with pytest.raises(ValueError, match=r"vocabulary is \[0, 64\)"):
        calibrate(tiny_llama, [bad], CFG)
    bad[0, 3] = -1
    with pytest.raises(ValueError, match="token ids in"):
        calibrate(tiny_llama, [bad], CFG)


# -- persistence ----------------------------------------------------------------------------------------------------
def test_save_and_load_teal_round_trip(tiny_llama, tiny_batches, tmp_path):
    from iclr25.teal import load_teal
    from iclr25.teal.small_model import build_model

    from .conftest import TINY

    calib = calibrate(tiny_llama, tiny_batches, CFG)
    plan = SparsityPlan({1: {"down": 0.7}}, default=0.4)
    ids = tiny_batches[0]
    with apply_teal(tiny_llama, calib, plan, prefill="all", mode="abs_quantile") as handle:
        expected = handle.thresholds()
        sparse = _logits(tiny_llama, ids)
        handle.save(tmp_path / "teal")
    fresh = build_model("llama", TINY, seed=0)  # same weights, no calibration at hand
    loaded = load_teal(fresh, tmp_path / "teal")
    assert loaded.thresholds() == expected  # bit-exact (float64 on disk)
    assert loaded.prefill == "all" and loaded.mode == "abs_quantile"
    assert torch.equal(_logits(fresh, ids), sparse)
    with pytest.raises(ValueError, match="without a calibration"):
        loaded.set_plan(SparsityPlan.uniform(0.1))
    loaded.remove()
    import dataclasses
    import json

    with pytest.raises(ValueError, match="different model"):
        load_teal(build_model("llama", dataclasses.replace(TINY, hidden_size=48), seed=0), tmp_path / "teal")
    with pytest.raises(ValueError, match="missing"):
        load_teal(fresh, tmp_path / "nowhere")
    st = tmp_path / "teal" / "teal_thresholds.safetensors"
    st.write_bytes(st.read_bytes()[:-8])  # truncated file
    with pytest.raises(ValueError, match="checksum"):
        load_teal(fresh, tmp_path / "teal")
    cfg = tmp_path / "teal" / "teal_config.json"
    cfg.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not an iclr25.teal thresholds config"):
        load_teal(fresh, tmp_path / "teal")
    assert not any(isinstance(m, TealLinear) for m in fresh.modules())


def test_save_pretrained_while_applied_writes_a_plain_model(tiny_llama, tiny_batches, tmp_path):
    from transformers import AutoModelForCausalLM

    calib = calibrate(tiny_llama, tiny_batches, CFG)
    ids = tiny_batches[0]
    dense = _logits(tiny_llama, ids)
    plain_keys = set(tiny_llama.state_dict())
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), backend="torch"):
        assert set(tiny_llama.state_dict()) == plain_keys  # no ".linear.weight", no threshold buffers
        tiny_llama.save_pretrained(tmp_path / "m")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    assert not any(isinstance(m, TealLinear) for m in reloaded.modules())
    ref = tiny_llama.state_dict()
    assert all(torch.equal(v, ref[k]) for k, v in reloaded.state_dict().items())  # the dense weights, unchanged
    assert torch.allclose(_logits(reloaded, ids), dense, atol=1e-6)


# -- int8 and fused q/k/v in the model path ---------------------------------------------------------------------------
def _absmax_int8(w):
    """Independent per-output-channel symmetric int8 quantization (round to nearest), dequantized."""
    scale = w.abs().amax(dim=1, keepdim=True) / 127.0
    return torch.round(w / scale).clamp(-127, 127) * scale


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
def test_int8_in_the_model_path(tiny_llama, tiny_batches, monkeypatch):
    import copy

    from iclr25.teal import kernels

    calib = calibrate(tiny_llama, tiny_batches, CFG)
    ids = tiny_batches[0][:1, :6]
    # oracle: the same model with each projection's weight replaced by its independently quantized version
    oracle = copy.deepcopy(tiny_llama)
    for layer in oracle.model.layers:
        for mod in (*[getattr(layer.self_attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj")],
                    *[getattr(layer.mlp, n) for n in ("gate_proj", "up_proj", "down_proj")]):  # fmt: skip
            mod.weight.data = _absmax_int8(mod.weight.data)
    calls = []
    real = kernels.sparse_gemv_int8
    monkeypatch.setattr(kernels, "sparse_gemv_int8", lambda *a, **k: calls.append(1) or real(*a, **k))
    with apply_teal(oracle, calib, SparsityPlan.uniform(0.5), prefill="all", backend="reference"):
        expected = _logits(oracle, ids)
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), prefill="all", quantize="int8") as handle:
        assert all(w._int8.qweight.dtype == torch.int8 for w in handle.wrappers.values())
        assert torch.allclose(_logits(tiny_llama, ids), expected, atol=1e-4)  # prefill path
        with torch.no_grad():
            out = tiny_llama(input_ids=ids[:, :1], use_cache=True)
            steps = [out.logits]
            for i in range(1, ids.shape[1]):
                out = tiny_llama(input_ids=ids[:, i : i + 1], past_key_values=out.past_key_values, use_cache=True)
                steps.append(out.logits)
        assert torch.allclose(torch.cat(steps, 1), expected, atol=1e-4)  # decode through the int8 kernel
        assert len(calls) == 14 * (ids.shape[1] - 1) + 14  # every projection of every one-token step


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
def test_fused_qkv_in_the_model_path(tiny_model, tiny_batches, monkeypatch):
    from iclr25.teal import kernels

    calib = calibrate(tiny_model, tiny_batches, CFG)
    ids = tiny_batches[0][:1, :6]

    def decode(**kw):
        with torch.no_grad(), apply_teal(tiny_model, calib, SparsityPlan.uniform(0.5), prefill="all", **kw) as h:
            out = tiny_model(input_ids=ids[:, :1], use_cache=True)
            steps = [out.logits]
            for i in range(1, ids.shape[1]):
                out = tiny_model(input_ids=ids[:, i : i + 1], past_key_values=out.past_key_values, use_cache=True)
                steps.append(out.logits)
            return torch.cat(steps, 1), h.extra_bytes()

    expected, _ = decode(backend="reference")
    calls = []
    real = kernels.sparse_qkv_gemv
    monkeypatch.setattr(kernels, "sparse_qkv_gemv", lambda *a, **k: calls.append(1) or real(*a, **k))
    fused, extra = decode(backend="torch", fuse_qkv=True)
    assert torch.allclose(fused, expected, atol=1e-5)
    assert len(calls) == 2 * ids.shape[1]  # one fused launch per block per token (not three)
    qkv_bytes = sum(m.weight.numel() * 4 for m in tiny_model.modules() if hasattr(m, "q_proj") for m in
                    (m.q_proj, m.k_proj, m.v_proj))  # fmt: skip
    o_gate_up_down = sum(m.weight.numel() * 4 for m in tiny_model.modules() if hasattr(m, "down_proj")
                         for m in (m.gate_proj, m.up_proj, m.down_proj))  # fmt: skip
    o_gate_up_down += sum(m.o_proj.weight.numel() * 4 for m in tiny_model.modules() if hasattr(m, "o_proj"))
    assert extra == qkv_bytes + o_gate_up_down  # one stacked q/k/v copy per block + the other copies


@pytest.mark.slow
def test_torch_compile_decode_matches_eager(tiny_llama, tiny_batches):
    calib = calibrate(tiny_llama, tiny_batches, CFG)
    prompt = tiny_batches[0][:1, :5]
    kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    with apply_teal(tiny_llama, calib, SparsityPlan.uniform(0.5), prefill="dense"):
        eager = tiny_llama.generate(prompt, **kwargs)
        compiled = torch.compile(tiny_llama.forward, backend="inductor")
        original = tiny_llama.forward
        tiny_llama.forward = compiled
        try:
            out = tiny_llama.generate(prompt, **kwargs)
        finally:
            tiny_llama.forward = original
    assert torch.equal(out, eager)
