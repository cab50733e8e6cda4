"""Small helpers for the end-to-end generation pipeline on tiny models: SFT and sampling."""

from __future__ import annotations

import torch

from iclr25.shared import progress

from .data.preference import collate_preference
from .logps import completion_labels, sequence_logps

__all__ = ["sample_completions", "supervised_finetune"]


def supervised_finetune(
    model, tokenizer, rows: list[dict], steps: int = 100, batch_size: int = 32, lr: float = 3e-3, seed: int = 0
) -> list[float]:
    """Maximum-likelihood fine-tuning on {"prompt", "completion"} rows (completion tokens + EOS only)."""
    if not rows:
        raise ValueError("supervised_finetune needs at least one row")
    examples = []
    for row in rows:
        p = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        c = tokenizer(row["completion"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append({"prompt_ids": p, "chosen_ids": c, "rejected_ids": c})
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in progress(range(steps), desc="sft", leave=False):
        idx = torch.randint(len(examples), (batch_size,), generator=gen).tolist()
        batch = collate_preference([examples[i] for i in idx], tokenizer.pad_token_id)
        half = slice(0, batch_size)  # the chosen half; rejected duplicates it
        ids, att, comp = batch["input_ids"][half], batch["attention_mask"][half], batch["completion_mask"][half]
        logits = model(input_ids=ids, attention_mask=att).logits
        labels = completion_labels(ids, comp)
        loss = -sequence_logps(logits, labels, length_normalize=True).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def sample_completions(
    model, tokenizer, prompts: list[str], max_new_tokens: int, seed: int = 0, temperature: float = 1.0
) -> list[str]:
    """Ancestral sampling of one completion per prompt (stops at EOS); returns decoded strings without EOS."""
    model.eval()
    out = []
    torch.manual_seed(seed)
    by_len: dict[int, list[int]] = {}
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    for i, ids in enumerate(encoded):
        by_len.setdefault(len(ids), []).append(i)
    results: dict[int, str] = {}
    for _, idxs in sorted(by_len.items()):
        ids = torch.tensor([encoded[i] for i in idxs])
        gen = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=temperature,
            top_k=0,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        for row, i in zip(gen[:, ids.shape[1] :].tolist(), idxs):
            if tokenizer.eos_token_id in row:
                row = row[: row.index(tokenizer.eos_token_id)]
            row = [t for t in row if t != tokenizer.pad_token_id]
            results[i] = tokenizer.decode(row)
    out = [results[i] for i in range(len(prompts))]
    return out
