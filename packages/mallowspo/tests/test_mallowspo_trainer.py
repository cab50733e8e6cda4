"""Trainer and data: TRL-format JSONL, tokenisation/collation, loss vs a manual computation, precompute,
gradient accumulation, checkpoint resume."""

import copy
import json
import math

import pytest
import torch

from iclr25.mallowspo import MallowsPOConfig, MallowsPOTrainer, mallows_theta_loss, neg_log_dispersion
from iclr25.mallowspo.data import collate_preference, load_preference_jsonl, save_preference_jsonl, tokenize_preference
from iclr25.mallowspo.dispersion import sequence_entropy
from iclr25.mallowspo.logps import completion_labels, sequence_logps
from iclr25.mallowspo.models import byte_tokenizer, tiny_causal_lm

ROWS = [
    {"prompt": "!abc:", "chosen": "aabb", "rejected": "dddde"},
    {"prompt": "?xy:", "chosen": "ab", "rejected": "hhg"},
    {"prompt": "!q:", "chosen": "abab", "rejected": "cc"},
    {"prompt": "?zz:", "chosen": "bbbbb", "rejected": "ffff"},
]


@pytest.fixture(scope="module")
def tok():
    return byte_tokenizer()


@pytest.fixture(scope="module")
def examples(tok):
    return tokenize_preference(ROWS, tok)


def _cfg(**kw):
    base = dict(
        beta=0.5,
        reference_free=False,
        length_normalization=False,
        learning_rate=1e-3,
        per_device_batch_size=2,
        gradient_accumulation_steps=1,
        warmup_ratio=0.0,
        max_length=64,
        max_prompt_length=32,
    )
    base.update(kw)
    return MallowsPOConfig(**base)


def test_jsonl_roundtrip_and_errors(tmp_path):
    path = tmp_path / "prefs.jsonl"
    assert save_preference_jsonl(path, ROWS) == 4
    assert load_preference_jsonl(path) == ROWS
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "a", "chosen": "b"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: missing keys"):
        load_preference_jsonl(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_preference_jsonl(bad)
    with pytest.raises(FileNotFoundError):
        load_preference_jsonl(tmp_path / "missing.jsonl")


def test_tokenize_and_collate(tok, examples):
    ex = examples[0]
    assert tok.decode(ex["prompt_ids"]) == "!abc:"
    assert ex["chosen_ids"][-1] == tok.eos_token_id and tok.decode(ex["chosen_ids"][:-1]) == "aabb"
    batch = collate_preference(examples[:2], tok.pad_token_id)
    assert batch["input_ids"].shape == (4, 11)  # rows: chosen0, chosen1, rejected0, rejected1
    assert batch["completion_mask"][0].tolist() == [0] * 5 + [1] * 5 + [0]
    assert batch["completion_mask"][2].tolist() == [0] * 5 + [1] * 6
    assert batch["attention_mask"][1].sum().item() == 4 + 3
    short = tokenize_preference(ROWS, tok, max_length=7, max_prompt_length=3)
    assert all(len(e["prompt_ids"]) <= 3 and len(e["prompt_ids"]) + len(e["chosen_ids"]) <= 7 for e in short)


def test_trainer_loss_matches_manual_computation(tok, examples):
    model, ref = tiny_causal_lm(seed=1), tiny_causal_lm(seed=2)
    trainer = MallowsPOTrainer(model, ref, _cfg(loss_type="mallows_dpo"))
    batch = collate_preference(examples[:2], tok.pad_token_id)
    loss, metrics = trainer.compute_loss(batch)
    labels = completion_labels(batch["input_ids"], batch["completion_mask"])
    with torch.no_grad():
        ref_logits = ref(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    pol = sequence_logps(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, labels)
    refl = sequence_logps(ref_logits, labels)
    h = sequence_entropy(ref_logits, labels)
    c = neg_log_dispersion(h[:2], h[2:], phi_star=0.29)
    manual = mallows_theta_loss(pol[:2], pol[2:], refl[:2], refl[2:], c, beta=0.5)
    assert loss.item() == pytest.approx(manual.item(), abs=1e-6)
    assert metrics["neg_log_dispersion"] == pytest.approx(c.mean().item(), abs=1e-6)


def test_sft_term(tok, examples):
    model, ref = tiny_causal_lm(seed=1), tiny_causal_lm(seed=2)
    batch = collate_preference(examples[:2], tok.pad_token_id)
    base, m = MallowsPOTrainer(model, ref, _cfg()).compute_loss(batch)
    with_sft, _ = MallowsPOTrainer(model, ref, _cfg(sft_coef=0.5)).compute_loss(batch)
    assert with_sft.item() == pytest.approx(base.item() - 0.5 * m["logps/chosen"], abs=1e-5)


def test_precompute_equals_on_the_fly(tok, examples):
    model, ref = tiny_causal_lm(seed=1), tiny_causal_lm(seed=2)
    trainer = MallowsPOTrainer(model, ref, _cfg(length_normalization=True))
    pre = trainer.precompute_reference(examples, batch_size=3)
    batch_live = collate_preference(examples[:2], tok.pad_token_id)
    batch_pre = collate_preference(pre[:2], tok.pad_token_id)
    assert "ref_chosen_entropy" in batch_pre
    l_live, _ = trainer.compute_loss(batch_live)
    no_ref = MallowsPOTrainer(model, None, _cfg(length_normalization=True))
    l_pre, _ = no_ref.compute_loss(batch_pre)
    assert l_pre.item() == pytest.approx(l_live.item(), abs=1e-6)
    with pytest.raises(ValueError, match="precomputed"):
        no_ref.compute_loss(batch_live)


def _grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_gradient_accumulation_equals_large_batch(tok, examples):
    ref = tiny_causal_lm(seed=2)
    big = tiny_causal_lm(seed=1)
    t_big = MallowsPOTrainer(big, ref, _cfg(per_device_batch_size=2))
    loss, _ = t_big.compute_loss(collate_preference(examples[:2], tok.pad_token_id))
    loss.backward()
    small = tiny_causal_lm(seed=1)
    t_small = MallowsPOTrainer(small, ref, _cfg(per_device_batch_size=1))
    for ex in examples[:2]:
        loss, _ = t_small.compute_loss(collate_preference([ex], tok.pad_token_id))
        (loss / 2).backward()
    assert torch.allclose(_grads(big), _grads(small), atol=1e-6)


def test_training_reduces_loss_and_resumes_exactly(tok, examples, tmp_path):
    ref = tiny_causal_lm(seed=2)
    cfg = _cfg(
        loss_type="mallows_dpo",
        num_epochs=3,
        per_device_batch_size=2,
        gradient_accumulation_steps=2,
        output_dir=str(tmp_path / "run"),
        save_steps=1,
    )
    full = MallowsPOTrainer(tiny_causal_lm(seed=1), ref, cfg)
    hist = full.train(examples)
    assert len(hist) == 3
    assert hist[-1]["loss"] < hist[0]["loss"]
    # interrupted run: 2 steps, then a fresh trainer resumes from the checkpoint
    cfg2 = copy.deepcopy(cfg)
    cfg2.output_dir = str(tmp_path / "run2")
    first = MallowsPOTrainer(tiny_causal_lm(seed=1), ref, cfg2)
    first.train(examples, stop_at=2)
    assert first.step == 2
    second = MallowsPOTrainer(tiny_causal_lm(seed=7), ref, cfg2)
    second.train(examples)
    assert second.step == 3
    for p, q in zip(full.model.parameters(), second.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


@pytest.mark.parametrize("loss_type", ["sigmoid", "mallows_ipo", "mallows_phi"])
def test_other_loss_types_train(tok, examples, loss_type):
    trainer = MallowsPOTrainer(tiny_causal_lm(seed=1), tiny_causal_lm(seed=2), _cfg(loss_type=loss_type))
    hist = trainer.train(examples, max_steps=2)
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in hist)
    if loss_type == "sigmoid":
        assert hist[0]["neg_log_dispersion"] == 1.0


def test_config_validation(tmp_path):
    with pytest.raises(ValueError, match="loss_type"):
        MallowsPOConfig(loss_type="kto")
    with pytest.raises(ValueError, match="unknown"):
        MallowsPOConfig.from_dict({"betta": 1.0})
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"beta": 0.2, "loss_type": "sigmoid"}))
    assert MallowsPOConfig.from_json(path).beta == 0.2
    assert MallowsPOConfig().beta == 10.0 and MallowsPOConfig().phi_star == 0.29
    with pytest.raises(ValueError, match="different objects"):
        m = tiny_causal_lm()
        MallowsPOTrainer(m, m)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_chunked_reference_head_equals_full_logits(arch):
    from iclr25.mallowspo.kernels import logp_entropy
    from iclr25.mallowspo.reference_pass import reference_token_stats, supports_chunked_head

    m = tiny_causal_lm(arch=arch, seed=3, n_layer=1, d_model=32, n_head=2)
    ids = torch.randint(0, 256, (4, 10))
    att = torch.ones_like(ids)
    att[2:, 7:] = 0
    lab = ids.masked_fill(att == 0, -100)
    lab[:, :3] = -100
    assert supports_chunked_head(m)
    chunked = reference_token_stats(m, ids, att, lab, chunk_rows=5)
    with torch.no_grad():
        full = logp_entropy(m(input_ids=ids, attention_mask=att).logits[:, :-1], lab[:, 1:])
    for c, f in zip(chunked, full):
        assert torch.allclose(c, f, atol=1e-5)
    # a logit transform in the config disables the chunked head (fallback to the ordinary forward)
    m.config.final_logit_softcapping = 30.0
    assert not supports_chunked_head(m)
    fallback = reference_token_stats(m, ids, att, lab)
    for c, f in zip(fallback, full):
        assert torch.allclose(c, f, atol=1e-5)


def _peaked_reference(seed=2):
    ref = tiny_causal_lm(seed=seed)
    with torch.no_grad():
        ref.lm_head.weight.mul_(5.0)  # non-uniform (H̄ ≈ 0.4–0.7, not clamped), so the scale is not ~0
    return ref


@pytest.mark.parametrize("loss_type", ["mallows_dpo", "mallows_phi", "mallows_ipo"])
def test_training_from_the_reference_moves_the_policy(tok, examples, loss_type):
    ref = _peaked_reference()
    policy = copy.deepcopy(ref)  # as every run starts: policy = reference, so Δ = 0 at step 1
    before = [p.detach().clone() for p in policy.parameters()]
    trainer = MallowsPOTrainer(policy, ref, _cfg(loss_type=loss_type, learning_rate=1e-2))
    hist = trainer.train(examples, max_steps=2)
    assert hist[0]["rewards/margins"] == 0.0  # really started at the reference
    assert hist[0]["grad_norm"] > 1e-4
    moved = max((p.detach() - b).abs().max().item() for p, b in zip(policy.parameters(), before))
    assert moved > 1e-4
    if loss_type == "mallows_phi":
        # the first step raises the chosen log-prob relative to the rejected one
        assert hist[1]["rewards/margins"] > 0


def test_vocab_size_restricts_only_the_entropy(tok, examples):
    ref = _peaked_reference()
    policy = copy.deepcopy(ref)
    v = ref.lm_head.out_features
    batch = collate_preference(examples, tok.pad_token_id)
    for cfg in (_cfg(vocab_size=200), _cfg(vocab_size=200, precompute_ref=True)):
        trainer = MallowsPOTrainer(policy, ref, cfg)
        b = batch
        if cfg.precompute_ref:
            b = collate_preference(trainer.precompute_reference(examples), tok.pad_token_id)
        _, m = trainer.compute_loss(b)
        assert m["rewards/chosen"] == 0.0 and m["rewards/rejected"] == 0.0
    # and the entropy does use the first 200 logits, normalised by ln 200 (independent computation)
    labels = completion_labels(batch["input_ids"], batch["completion_mask"])
    with torch.no_grad():
        logits = ref(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1, :200]
    p = torch.softmax(logits.double(), -1)
    ent = -(p * torch.log(p)).sum(-1) / math.log(200)
    mask = labels[:, 1:] != -100
    h = (ent * mask).sum(-1) / mask.sum(-1)
    trainer = MallowsPOTrainer(policy, ref, _cfg(vocab_size=200))
    got = trainer.reference_stats({k: v for k, v in batch.items()})
    assert torch.allclose(torch.cat([got["ref_chosen_entropy"], got["ref_rejected_entropy"]]).double(), h, atol=1e-5)
    assert v > 200


@pytest.mark.parametrize(
    "bad",
    [
        {"beta": float("nan")},
        {"beta": -1.0},
        {"phi_star": 0.0},
        {"dispersion_eps": 1.5},
        {"vocab_size": 1},
        {"vocab_size": 2.5},
        {"fixed_neg_log_dispersion": -0.5},
        {"fixed_neg_log_dispersion": float("nan")},
        {"label_smoothing": 0.5},
        {"mixing_alpha": 1.5},
        {"learning_rate": 0.0},
        {"per_device_batch_size": 0},
        {"gradient_accumulation_steps": 1.5},
        {"max_prompt_length": 64},
        {"warmup_ratio": 1.0},
        {"max_grad_norm": -1.0},
        {"ref_chunk_rows": 0},
        {"backend": "cuda"},
        {"reference_free": "no"},
        {"loss_type": "mallows_phi", "label_smoothing": 0.1},
        {"loss_type": "mallows_phi", "mixing_alpha": 0.5},
        {"loss_type": "mallows_ipo", "label_smoothing": 0.1},
    ],
)
def test_config_rejects_invalid_values_at_construction(bad):
    with pytest.raises((ValueError, TypeError)) as err:
        _cfg(**bad)
    assert next(k for k in bad if k != "loss_type") in str(err.value)


def test_bad_data_inputs(tok, tmp_path):
    bad = tmp_path / "bytes.jsonl"
    bad.write_bytes(json.dumps(ROWS[0]).encode() + b"\n" + b'{"prompt": "\xff\xfe", "chosen": "a", "rejected": "b"}\n')
    with pytest.raises(ValueError, match=r"bytes.jsonl:2: not valid UTF-8"):
        load_preference_jsonl(bad)
    # max_length shorter than the prompt: the row is counted and reported, not silently dropped
    rows = [{"prompt": "a long prompt here:", "chosen": "x", "rejected": "y"}, ROWS[1]]
    with pytest.warns(UserWarning, match=r"dropped 1 of 2 rows \(indices \[0\]\)"):
        out = tokenize_preference(rows, tok, max_length=8)
    assert len(out) == 1
    with pytest.raises(ValueError, match="no row is left"):
        tokenize_preference(rows[:1], tok, max_length=8)
    with pytest.raises(ValueError, match="empty chosen_ids"):
        collate_preference([{"prompt_ids": [1, 2], "chosen_ids": [], "rejected_ids": [3]}], tok.pad_token_id)


def test_calibrate_phi_star(tok, examples):
    from iclr25.mallowspo import calibrate_phi_star

    ref = _peaked_reference()
    res = calibrate_phi_star(ref, examples, pad_token_id=tok.pad_token_id, target_mean_scale=1.0, batch_size=3)
    # independent: full-logit entropies, -log of the pair means, phi* = 1 / mean
    batch = collate_preference(examples, tok.pad_token_id)
    labels = completion_labels(batch["input_ids"], batch["completion_mask"])
    with torch.no_grad():
        logits = ref(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].double()
    p = torch.softmax(logits, -1)
    ent = -(p * torch.log(p)).sum(-1) / math.log(logits.shape[-1])
    mask = labels[:, 1:] != -100
    h = (ent * mask).sum(-1) / mask.sum(-1)
    hbar = (h[: len(examples)] + h[len(examples) :]) / 2
    expected = 1.0 / float((-torch.log(hbar)).mean())
    assert res["phi_star"] == pytest.approx(expected, rel=1e-4)
    assert res["scale"]["mean"] == pytest.approx(1.0, rel=1e-6)
    assert res["n_pairs"] == len(examples)
    # the calibrated scale gives a trainer whose mean dispersion is the target
    trainer = MallowsPOTrainer(copy.deepcopy(ref), ref, _cfg(phi_star=res["phi_star"], per_device_batch_size=4))
    _, m = trainer.compute_loss(batch)
    assert m["neg_log_dispersion"] == pytest.approx(1.0, rel=1e-4)
    with pytest.raises(ValueError, match="uniform reference"):
        from iclr25.mallowspo.calibration import phi_star_from_entropy

        phi_star_from_entropy(torch.ones(3), torch.ones(3))


@pytest.mark.parametrize("loss_type", ["mallows_dpo", "mallows_phi"])
def test_bf16_autocast_trains_from_the_reference(tok, examples, loss_type):
    ref = _peaked_reference()
    batch = collate_preference(examples, tok.pad_token_id)
    fp32 = MallowsPOTrainer(copy.deepcopy(ref), ref, _cfg(loss_type=loss_type, per_device_batch_size=4))
    amp = MallowsPOTrainer(
        copy.deepcopy(ref), ref, _cfg(loss_type=loss_type, per_device_batch_size=4, autocast_dtype="bfloat16")
    )
    a, ma = fp32.compute_loss(batch)
    b, mb = amp.compute_loss(batch)
    assert b.dtype == torch.float32 and torch.isfinite(b)
    assert b.item() == pytest.approx(a.item(), rel=2e-2)  # bf16 forwards, fp32 reductions
    assert mb["neg_log_dispersion"] == pytest.approx(ma["neg_log_dispersion"], rel=5e-2)
    assert abs(mb["neg_log_dispersion"] - ma["neg_log_dispersion"]) > 0  # the forwards really ran in bf16
    before = [p.detach().clone() for p in amp.model.parameters()]
    hist = amp.train(examples, max_steps=2)
    assert hist[0]["grad_norm"] > 1e-4 and math.isfinite(hist[1]["loss"])
    assert max((p.detach() - q).abs().max().item() for p, q in zip(amp.model.parameters(), before)) > 1e-4
    with pytest.raises(ValueError, match="autocast_dtype"):
        _cfg(autocast_dtype="float16")
