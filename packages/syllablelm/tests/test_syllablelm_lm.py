"""Unit LM: causality, KV cache == recomputation, analytic parameter count, structure, training and resume."""

from __future__ import annotations

import pytest
import torch

from iclr25.syllablelm.lm import SyllableLM, SyllableLMConfig, analytic_num_params, pad_batch, tri_stage_lr
from iclr25.syllablelm.lm_train import LMTrainConfig, load_lm_checkpoint, pair_accuracy, train_lm

TINY = SyllableLMConfig(vocab=23, depth=2, heads=2, dim=16, mlp_ratio=4, dropout=0.0, max_pos=64)


def test_official_defaults_and_param_count():
    cfg = SyllableLMConfig()
    assert (cfg.vocab, cfg.depth, cfg.heads, cfg.dim, cfg.mlp_ratio, cfg.dropout, cfg.max_pos, cfg.final_norm) == (
        8192,
        12,
        12,
        768,
        4,
        0.1,
        3000,
        False,
    )
    with torch.device("meta"):
        model = SyllableLM(cfg)
    assert model.num_params() == analytic_num_params(cfg)
    assert model.norm is None  # no final LayerNorm
    assert all(b.qkv.bias is None for b in model.blocks)
    assert cfg.bos == cfg.stop == 8192
    tiny = SyllableLM(SyllableLMConfig(**{**TINY.__dict__, "final_norm": True}))
    assert tiny.num_params() == analytic_num_params(tiny.config)


def test_tied_embeddings():
    model = SyllableLM(TINY).eval()
    tokens = torch.tensor([[23, 1, 2]])
    logits, _ = model(tokens)
    assert logits.shape == (1, 3, 24)
    with torch.no_grad():
        model.embed.weight[5] += 1.0
    logits2, _ = model(tokens)
    assert not torch.allclose(logits[..., 5], logits2[..., 5])


def test_future_tokens_do_not_change_past_logits():
    torch.manual_seed(0)
    model = SyllableLM(TINY).eval()
    a = torch.randint(0, 23, (1, 12))
    b = a.clone()
    b[0, 7:] = torch.randint(0, 23, (5,))
    la, _ = model(a)
    lb, _ = model(b)
    torch.testing.assert_close(la[:, :7], lb[:, :7])
    assert not torch.allclose(la[:, 7:], lb[:, 7:])


def test_cached_logits_equal_full_recomputation():
    torch.manual_seed(1)
    model = SyllableLM(TINY).eval()
    tokens = torch.randint(0, 24, (2, 10))
    full, _ = model(tokens)
    _, cache = model(tokens[:, :4])
    outs = []
    for t in range(4, 10):
        step, cache = model(tokens[:, t : t + 1], cache)
        outs.append(step)
    torch.testing.assert_close(torch.cat(outs, 1), full[:, 4:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("temperature,top_k", [(0.0, None), (1.0, 5)])
def test_generate_with_cache_equals_without(temperature, top_k):
    torch.manual_seed(2)
    model = SyllableLM(TINY).eval()
    prompt = torch.tensor([3, 4, 5])
    kw = dict(max_new_tokens=15, temperature=temperature, top_k=top_k, stop_at_eos=False)
    a = model.generate(prompt, use_cache=True, generator=torch.Generator().manual_seed(0), **kw)
    b = model.generate(prompt, use_cache=False, generator=torch.Generator().manual_seed(0), **kw)
    assert torch.equal(a, b)
    assert torch.equal(a[:3], prompt) and len(a) == 18


def test_loss_and_score_agree():
    torch.manual_seed(3)
    model = SyllableLM(TINY).eval()
    seqs = [[1, 2, 3], [4, 5, 6, 7, 8]]
    scores = model.score(seqs)
    n_tokens = 4 + 6
    assert model.loss(seqs).item() == pytest.approx(-float(scores.sum()) / n_tokens, rel=1e-5)
    # padded tensor input with -100
    padded = torch.tensor([[1, 2, 3, -100, -100], [4, 5, 6, 7, 8]])
    assert model.loss(padded).item() == pytest.approx(model.loss(seqs).item(), rel=1e-6)
    inp, tgt = pad_batch(seqs, 23)
    assert inp[0].tolist() == [23, 1, 2, 3, 23, 23] and tgt[0].tolist() == [1, 2, 3, 23, -100, -100]
    with pytest.raises(ValueError):
        model.score([[1, 99]])


def test_tri_stage_schedule():
    assert tri_stage_lr(0, 400) == pytest.approx(0.01)
    assert tri_stage_lr(16, 400) == pytest.approx(1.0)
    assert tri_stage_lr(50, 400) == pytest.approx(1.0)
    assert tri_stage_lr(400, 400) == pytest.approx(0.1)


def test_training_learns_and_resumes(tmp_path):
    torch.manual_seed(4)
    seqs = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10], [1, 2, 3, 11]] * 4
    cfg = LMTrainConfig(steps=60, lr=3e-2, batch_size=4, checkpoint_every=30)
    model = SyllableLM(TINY)
    losses = train_lm(model, seqs, cfg)
    assert losses[-1] < 0.5 * losses[0]
    assert pair_accuracy(model, [([1, 2, 3, 4], [1, 4, 3, 2]), ([7, 8, 9, 10], [10, 9, 8, 7])]) == 1.0


def test_resume_is_exact_with_dropout(tmp_path):
    """until=3, then a resume in a fresh model with a disturbed global RNG == 6 straight steps, bit for bit."""
    seqs = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10], [1, 2, 3, 11], [4, 4, 2]]
    cfg = LMTrainConfig(steps=6, lr=1e-2, batch_size=3, seed=3)
    drop = SyllableLMConfig(**{**TINY.__dict__, "dropout": 0.3})
    torch.manual_seed(5)
    ref = SyllableLM(drop)
    init = {k: v.clone() for k, v in ref.state_dict().items()}
    torch.manual_seed(11)
    ref_losses = train_lm(ref, seqs, cfg)
    ck = tmp_path / "lm.pt"
    part = SyllableLM(drop)
    part.load_state_dict(init)
    torch.manual_seed(11)
    first = train_lm(part, seqs, cfg, checkpoint=ck, until=3)
    assert load_lm_checkpoint(ck)[1]["step"] == 3
    torch.manual_seed(999)  # whatever the caller's RNG state, the checkpoint's is used
    resumed = SyllableLM(drop)
    rest = train_lm(resumed, seqs, cfg, checkpoint=ck)
    assert first + rest == ref_losses
    for k, v in ref.state_dict().items():
        assert torch.equal(resumed.state_dict()[k], v), k
    assert load_lm_checkpoint(ck)[1]["step"] == 6
    with pytest.raises(ValueError, match="until"):
        train_lm(resumed, seqs, cfg, until=7)


def test_score_and_generate_run_in_eval_mode():
    torch.manual_seed(2)
    model = SyllableLM(SyllableLMConfig(**{**TINY.__dict__, "dropout": 0.5})).train()
    a, b = model.score([[1, 2, 3, 4]]), model.score([[1, 2, 3, 4]])
    assert torch.equal(a, b)
    assert model.training and all(m.training for m in model.modules())  # the caller's mode is restored
    with torch.no_grad():
        ref = model.eval().score([[1, 2, 3, 4]])
    assert torch.equal(a, ref)
    model.train()
    g1 = model.generate([1, 2], 6, temperature=0.0, stop_at_eos=False)
    g2 = model.generate([1, 2], 6, temperature=0.0, stop_at_eos=False)
    assert torch.equal(g1, g2) and model.training


@pytest.mark.parametrize("top_k", [0, -1, 2.5, True])
def test_generate_rejects_bad_top_k(top_k):
    model = SyllableLM(TINY)
    with pytest.raises(ValueError, match="top_k"):
        model.generate([1, 2], 3, top_k=top_k)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_batch_equals_one_at_a_time(use_cache):
    """Ragged prompts (an empty one included), left-padded: greedy rows == single-prompt generate; logits match."""
    torch.manual_seed(4)
    model = SyllableLM(SyllableLMConfig(**{**TINY.__dict__, "dropout": 0.2})).train()
    prompts = [[1, 2, 3, 4, 5, 6], [7], [], [3, 3, 9, 1]]
    for stop_at_eos in (True, False):
        batch = model.generate_batch(prompts, 9, temperature=0.0, use_cache=use_cache, stop_at_eos=stop_at_eos)
        single = [model.generate(p, 9, temperature=0.0, stop_at_eos=stop_at_eos) for p in prompts]
        assert [b.tolist() for b in batch] == [s.tolist() for s in single]
    assert model.training  # eval mode only inside
    # the padded forward pass with per-row positions reproduces each row's own logits
    model.eval()
    stop = model.config.stop
    inp = torch.tensor([[stop, stop, stop, 1, 2], [stop, 3, 4, 5, 6]])  # BOS = STOP; row 0 has two pads
    mask = torch.tensor([[False, False, True, True, True], [True] * 5])
    positions = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])
    with torch.no_grad():
        logits, _ = model(inp, key_mask=mask, positions=positions)
        assert torch.isfinite(logits).all()
        ref0, _ = model(inp[:1, 2:])
        ref1, _ = model(inp[1:])
    torch.testing.assert_close(logits[0, 2:], ref0[0])
    torch.testing.assert_close(logits[1], ref1[0])


def test_generate_batch_sampling_and_bad_input():
    torch.manual_seed(0)
    model = SyllableLM(TINY)
    g = torch.Generator().manual_seed(1)
    a = model.generate_batch([[1, 2], [3]], 5, temperature=1.0, top_k=3, generator=g, stop_at_eos=False)
    g = torch.Generator().manual_seed(1)
    b = model.generate_batch([[1, 2], [3]], 5, temperature=1.0, top_k=3, generator=g, stop_at_eos=False)
    assert [len(x) for x in a] == [7, 6] and all(torch.equal(x, y) for x, y in zip(a, b))
    assert [x.tolist() for x in model.generate_batch([[1, 2]], 0)] == [[1, 2]]
    with pytest.raises(ValueError, match="non-empty list"):
        model.generate_batch([], 3)
    with pytest.raises(ValueError, match="prompt ids"):
        model.generate_batch([[1], [TINY.vocab]], 3)
    with pytest.raises(ValueError, match="top_k"):
        model.generate_batch([[1]], 3, top_k=0)
