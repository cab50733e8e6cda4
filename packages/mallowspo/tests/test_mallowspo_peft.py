"""PEFT/LoRA through the standalone trainer on a tiny model: the reference is the base model with the adapters
disabled (no second copy), only LoRA parameters change, and training from policy = reference moves the adapters."""

import pytest
import torch

from iclr25.mallowspo import MallowsPOConfig, MallowsPOTrainer
from iclr25.mallowspo.data import collate_preference, tokenize_preference
from iclr25.mallowspo.logps import completion_labels
from iclr25.mallowspo.models import byte_tokenizer, tiny_causal_lm
from iclr25.mallowspo.reference_pass import reference_sequence_stats

peft = pytest.importorskip("peft")

ROWS = [
    {"prompt": "!abc:", "chosen": "aabb", "rejected": "dddde"},
    {"prompt": "?xy:", "chosen": "ab", "rejected": "hhg"},
    {"prompt": "!q:", "chosen": "abab", "rejected": "cc"},
    {"prompt": "?zz:", "chosen": "bbbbb", "rejected": "ffff"},
]


def _base(arch="llama"):
    model = tiny_causal_lm(arch=arch, seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(5.0)  # a peaked reference, so the dispersion scale is not ~0
    return model


def _lora(model, arch="llama"):
    targets = ["q_proj", "v_proj"] if arch == "llama" else ["c_attn"]
    cfg = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets, fan_in_fan_out=arch == "gpt2")
    return peft.get_peft_model(model, cfg)


def _cfg(**kw):
    base = dict(
        beta=0.5,
        reference_free=False,
        length_normalization=False,
        learning_rate=1e-2,
        per_device_batch_size=2,
        gradient_accumulation_steps=1,
        warmup_ratio=0.0,
        phi_star=1.0,
    )
    base.update(kw)
    return MallowsPOConfig(**base)


@pytest.fixture(scope="module")
def examples():
    return tokenize_preference(ROWS, byte_tokenizer())


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_reference_is_the_base_model_with_adapters_disabled(examples, arch):
    policy = _lora(_base(arch), arch)
    with torch.no_grad():  # non-zero adapters, so the policy differs from its base
        gen = torch.Generator().manual_seed(0)
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
    policy.train()
    trainer = MallowsPOTrainer(policy, None, _cfg(loss_type="mallows_dpo"))
    assert trainer.adapter_reference and trainer.ref_model is None  # no second copy of the weights
    batch = collate_preference(examples, 256)
    ref = trainer.reference_stats(batch)
    assert policy.training  # the policy's mode is restored after the reference pass
    base = _base(arch).eval()  # an independent copy of the same base weights
    labels = completion_labels(batch["input_ids"], batch["completion_mask"])
    with torch.no_grad():
        logits = base(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.double()
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, labels[:, 1:].clamp(min=0)[..., None])[..., 0]
    expect = (lp * (labels[:, 1:] != -100)).sum(-1).float()
    got = torch.cat([ref["ref_chosen_logps"], ref["ref_rejected_logps"]])
    torch.testing.assert_close(got, expect, atol=1e-4, rtol=0)
    logps_b, ent_b = reference_sequence_stats(base, batch)
    torch.testing.assert_close(got, logps_b, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat([ref["ref_chosen_entropy"], ref["ref_rejected_entropy"]]), ent_b)
    # with the adapters enabled the policy's own log-probs differ (so the check above can fail)
    with torch.no_grad():
        pol = policy(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.double()
    assert (pol - logits).abs().max() > 1e-2


@pytest.mark.parametrize("loss_type", ["mallows_dpo", "mallows_phi"])
def test_training_from_the_reference_moves_only_the_adapters(examples, loss_type):
    policy = _lora(_base())  # LoRA starts with B = 0: policy = reference exactly
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    trainer = MallowsPOTrainer(policy, None, _cfg(loss_type=loss_type))
    hist = trainer.train(examples, max_steps=3)
    assert hist[0]["rewards/margins"] == 0.0  # really started at the reference
    assert hist[0]["grad_norm"] > 1e-4
    lora = [n for n in before if "lora_" in n]
    assert lora
    changed = {n for n, p in policy.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert changed and changed <= set(lora)  # only LoRA parameters change
    assert any("lora_B" in n for n in changed)
    # the reference is still the untouched base model: its log-probs equal a fresh copy's
    batch = collate_preference(examples, 256)
    ref = trainer.reference_stats(batch)
    logps_b, _ = reference_sequence_stats(_base().eval(), batch)
    torch.testing.assert_close(torch.cat([ref["ref_chosen_logps"], ref["ref_rejected_logps"]]), logps_b)
    assert hist[-1]["rewards/margins"] > 0  # the adapters raise the chosen completion relative to the rejected


def test_precompute_with_adapter_reference_equals_online(examples):
    policy = _lora(_base())
    trainer = MallowsPOTrainer(policy, None, _cfg(loss_type="mallows_phi"))
    pre = trainer.precompute_reference(examples, batch_size=3)
    online, _ = trainer.compute_loss(collate_preference(examples, 256))
    cached, _ = trainer.compute_loss(collate_preference(pre, 256))
    assert cached.item() == pytest.approx(online.item(), abs=1e-6)
