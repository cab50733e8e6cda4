"""The demo: the Mallows bandit (DPO vs MallowsPO-θ vs MallowsPO-ϕ) and a small generation run on a tiny LM."""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from .bandit import MallowsBandit, fit_bandit_policy
from .config import MallowsPOConfig
from .data.preference import collate_preference, tokenize_preference
from .data.synthetic import SyntheticSentiment
from .generation import sample_completions, supervised_finetune
from .logps import completion_labels, sequence_logps
from .models import byte_tokenizer, tiny_causal_lm
from .trainer import MallowsPOTrainer

__all__ = ["run_bandit_demo", "run_demo", "run_generation_demo"]

BANDIT_METHODS = {"DPO": "dpo", "MallowsPO-θ": "mallows_theta", "MallowsPO-ϕ": "mallows_phi"}
GENERATION_METHODS = {"DPO": "sigmoid", "MallowsPO-θ": "mallows_dpo", "MallowsPO-ϕ": "mallows_phi"}


@torch.no_grad()
def _relative_distance(model, ref) -> float:
    """‖θ - θ_ref‖ / ‖θ_ref‖ over all parameters."""
    num = sum(float((p - q).double().pow(2).sum()) for p, q in zip(model.parameters(), ref.parameters()))
    den = sum(float(q.double().pow(2).sum()) for q in ref.parameters())
    return (num / den) ** 0.5


def run_bandit_demo(n_pairs: int = 4000, beta: float = 0.5, seed: int = 0, max_iter: int = 500) -> list[dict]:
    """Two 5-arm bandits with two prompts each: Mallows-θ data (BT scales 2.0 and 0.3) and Mallows-ϕ data
    (ϕ = 0.2 and 0.8). Each method is fit on the same sampled pairs; metrics vs the target π_ref exp(-μ0/β)."""
    central = np.tile(np.arange(1, 6), (2, 1))
    bandits = {
        "theta": MallowsBandit(central, np.exp(-np.array([2.0, 0.3]) / 2), model="theta"),
        "phi": MallowsBandit(central, np.array([0.2, 0.8]), model="phi"),
    }
    rows = []
    for data, bandit in bandits.items():
        pairs = bandit.sample_pairs(n_pairs, rng=seed)
        target = bandit.target_policy(beta)
        for name, method in BANDIT_METHODS.items():
            fit = fit_bandit_policy(bandit, method, beta, pairs=pairs, max_iter=max_iter)  # starts at π_ref
            pol = fit.policy
            rows.append(
                {
                    "data": f"Mallows-{'θ' if data == 'theta' else 'ϕ'}",
                    "method": name,
                    "grad_norm_at_ref": fit.grad_norm_at_start,
                    "reward": float(bandit.expected_reward(pol).mean()),
                    "kl_to_target": float(bandit.kl(target, pol).mean()),
                    "policy_prompt0": np.round(pol[0], 3).tolist(),
                    "policy_prompt1": np.round(pol[1], 3).tolist(),
                }
            )
        rows.append(
            {
                "data": f"Mallows-{'θ' if data == 'theta' else 'ϕ'}",
                "method": "target π_ref·exp(-μ0/β)",
                "grad_norm_at_ref": float("nan"),
                "reward": float(bandit.expected_reward(target).mean()),
                "kl_to_target": 0.0,
                "policy_prompt0": np.round(target[0], 3).tolist(),
                "policy_prompt1": np.round(target[1], 3).tolist(),
            }
        )
    return rows


@torch.no_grad()
def _evaluate(policy, ref, tok, task: SyntheticSentiment, n_per_kind: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for kind in task.kinds:
        prompts = [task.prompt(rng, kind) for _ in range(n_per_kind)]
        comps = sample_completions(policy, tok, prompts, task.completion_length + 1, seed=seed)
        out[f"reward{kind}"] = float(np.mean([task.reward(c) for c in comps]))
        rows = tokenize_preference([{"prompt": p, "chosen": c, "rejected": c} for p, c in zip(prompts, comps)], tok)
        batch = collate_preference(rows, tok.pad_token_id)
        half = slice(0, len(rows))
        ids, att = batch["input_ids"][half], batch["attention_mask"][half]
        labels = completion_labels(ids, batch["completion_mask"][half])
        kl = sequence_logps(policy(input_ids=ids, attention_mask=att).logits, labels) - sequence_logps(
            ref(input_ids=ids, attention_mask=att).logits, labels
        )
        out[f"kl{kind}"] = float(kl.mean())
    return out


def run_generation_demo(
    sft_steps: int = 120,
    n_pairs: int = 192,
    epochs: int = 2,
    eval_per_kind: int = 64,
    beta: float = 0.1,
    seed: int = 0,
    n_layer: int = 2,
    d_model: int = 64,
) -> list[dict]:
    """SFT a tiny GPT-2 on the synthetic task, sample pairs, label them with prompt-dependent BT noise, then train
    DPO, MallowsPO-θ and MallowsPO-ϕ (dispersion from the reference entropy, ϕ(x) = exp(-c(x))) on the same pairs,
    each starting from policy = reference. Each row records the gradient norm of the first step (at Δ = 0) and how
    far the parameters moved (relative L2 distance to the reference)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tok = byte_tokenizer()
    task = SyntheticSentiment()
    ref = tiny_causal_lm(seed=seed, n_layer=n_layer, d_model=d_model)
    supervised_finetune(ref, tok, task.sft_rows(1024, rng), steps=sft_steps, batch_size=32, lr=3e-3, seed=seed)
    prompts = [task.prompt(rng) for _ in range(n_pairs)]
    a = sample_completions(ref, tok, prompts, task.completion_length + 1, seed=seed + 1)
    b = sample_completions(ref, tok, prompts, task.completion_length + 1, seed=seed + 2)
    examples = tokenize_preference(task.label_pairs(prompts, a, b, rng), tok)
    rows = []
    base = _evaluate(ref, ref, tok, task, eval_per_kind, seed + 3)
    nan = float("nan")
    rows.append({"method": "reference (SFT)", **base, "c!": nan, "c?": nan, "grad_norm_step1": nan, "moved": 0.0})
    for name, loss_type in GENERATION_METHODS.items():
        cfg = MallowsPOConfig(
            loss_type=loss_type,
            beta=beta,
            reference_free=False,
            length_normalization=False,
            learning_rate=1e-3,
            per_device_batch_size=16,
            gradient_accumulation_steps=1,
            num_epochs=epochs,
            warmup_ratio=0.0,
            precompute_ref=True,
            seed=seed,
        )
        policy = copy.deepcopy(ref)
        trainer = MallowsPOTrainer(policy, ref, cfg, pad_token_id=tok.pad_token_id)
        pre = trainer.precompute_reference(examples)
        hist = trainer.train(pre)
        scales = {}
        for kind in task.kinds:
            sel = [e for e, p in zip(pre, prompts) if p[0] == kind]
            h = torch.tensor([(e["ref_chosen_entropy"] + e["ref_rejected_entropy"]) / 2 for e in sel])
            scales[f"c{kind}"] = float((-cfg.phi_star * torch.log(h.clamp(min=cfg.dispersion_eps))).mean())
        moved = _relative_distance(policy, ref)
        evals = _evaluate(policy, ref, tok, task, eval_per_kind, seed + 3)
        rows.append({"method": name, **evals, **scales, "grad_norm_step1": hist[0]["grad_norm"], "moved": moved})
    return rows


def _fmt_policy(p: list[float]) -> str:
    return "(" + " ".join(f"{x:.3f}" for x in p) + ")"


def format_bandit_table(rows: list[dict]) -> str:
    head = (
        f"{'data':<10} {'method':<26} {'|∇| at π_ref':>12} {'reward':>7} {'KL(target‖π)':>13}  "
        "π(·|x0)                            π(·|x1)"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['data']:<10} {r['method']:<26} {r['grad_norm_at_ref']:>12.4f} {r['reward']:>7.3f} "
            f"{r['kl_to_target']:>13.4f}  "
            f"{_fmt_policy(r['policy_prompt0']):<34} {_fmt_policy(r['policy_prompt1'])}"
        )
    return "\n".join(lines)


def format_generation_table(rows: list[dict]) -> str:
    head = (
        f"{'method':<16} {'|∇| step 1':>10} {'moved':>7} {'reward(!)':>9} {'reward(?)':>9} {'KL(!)':>7} {'KL(?)':>7} "
        f"{'c(!)':>6} {'c(?)':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['method']:<16} {r['grad_norm_step1']:>10.4f} {r['moved']:>7.4f} {r['reward!']:>9.3f} "
            f"{r['reward?']:>9.3f} {r['kl!']:>7.2f} {r['kl?']:>7.2f} {r['c!']:>6.3f} {r['c?']:>6.3f}"
        )
    return "\n".join(lines)


def run_demo(quick: bool = False, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    if quick:
        bandit = run_bandit_demo(n_pairs=500, seed=seed, max_iter=50)
        gen = run_generation_demo(sft_steps=2, n_pairs=8, epochs=1, eval_per_kind=2, seed=seed, n_layer=1, d_model=32)
    else:
        bandit = run_bandit_demo(seed=seed)
        gen = run_generation_demo(seed=seed)
    return {"bandit": bandit, "generation": gen, "seconds": time.perf_counter() - t0}
