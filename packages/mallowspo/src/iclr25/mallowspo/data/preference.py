"""Preference data in the TRL format: JSONL rows {"prompt", "chosen", "rejected"} (strings).

Loading checks every row; tokenisation splits prompt and completions like TRL (prompt ids = the common prefix of
the tokenised prompt and prompt+completion); collation stacks [chosen; rejected] right-padded with a completion mask.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from iclr25.shared import atomic_write

__all__ = ["collate_preference", "load_preference_jsonl", "save_preference_jsonl", "tokenize_preference"]

FIELDS = ("prompt", "chosen", "rejected")


def load_preference_jsonl(path: str | Path) -> list[dict]:
    """Read a TRL-format preference JSONL file; raises ValueError naming the bad line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"preference file not found: {path}")
    rows = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}:{lineno}: not valid UTF-8 (byte {e.start}: {e.reason}); JSONL must be UTF-8 text"
                ) from e
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object with keys {FIELDS}")
            missing = [k for k in FIELDS if k not in row]
            if missing:
                raise ValueError(f"{path}:{lineno}: missing keys {missing}; expected {FIELDS}")
            bad = [k for k in FIELDS if not isinstance(row[k], str)]
            if bad:
                raise ValueError(f"{path}:{lineno}: keys {bad} must be strings (TRL standard, non-conversational)")
            rows.append({k: row[k] for k in row})
    if not rows:
        raise ValueError(f"{path}: no preference rows")
    return rows


def save_preference_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    """Write rows atomically; returns the number of rows. Each row must have string prompt/chosen/rejected."""
    rows = list(rows)
    for i, row in enumerate(rows):
        if not all(isinstance(row.get(k), str) for k in FIELDS):
            raise ValueError(f"row {i} needs string fields {FIELDS}")
    with atomic_write(path, mode="w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def tokenize_preference(
    rows: Iterable[dict],
    tokenizer,
    max_length: int | None = None,
    max_prompt_length: int | None = None,
    add_eos: bool = True,
) -> list[dict]:
    """Text rows -> {"prompt_ids", "chosen_ids", "rejected_ids"} (lists of ints), keeping extra keys.

    An EOS token is appended to both completions (as TRL does). Prompts longer than ``max_prompt_length`` keep their
    end; then each prompt+completion is cut to ``max_length`` keeping its start. Rows left without any completion
    token (``max_length`` not longer than the prompt, or an empty completion without EOS) are dropped with a
    ``UserWarning`` giving their count and indices; if no row is left, ``ValueError``.
    """
    if max_length is not None and (isinstance(max_length, bool) or int(max_length) < 1):
        raise ValueError(f"max_length must be a positive integer or None, got {max_length!r}")
    if max_prompt_length is not None and (isinstance(max_prompt_length, bool) or int(max_prompt_length) < 0):
        raise ValueError(f"max_prompt_length must be a non-negative integer or None, got {max_prompt_length!r}")
    eos = tokenizer.eos_token_id if add_eos else None
    if add_eos and eos is None:
        raise ValueError("add_eos=True but the tokenizer has no eos_token_id")
    out = []
    dropped: list[int] = []
    n_rows = 0
    for i, row in enumerate(rows):
        n_rows += 1
        p = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        pc = tokenizer(row["prompt"] + row["chosen"], add_special_tokens=False)["input_ids"]
        pr = tokenizer(row["prompt"] + row["rejected"], add_special_tokens=False)["input_ids"]
        n = min(_common_prefix(p, pc), _common_prefix(p, pr))
        prompt, chosen, rejected = p[:n], pc[n:], pr[n:]
        if eos is not None:
            chosen, rejected = chosen + [eos], rejected + [eos]
        if max_prompt_length is not None and len(prompt) > max_prompt_length:
            prompt = prompt[-max_prompt_length:]
        if max_length is not None:
            room = max_length - len(prompt)
            chosen, rejected = chosen[: max(room, 0)], rejected[: max(room, 0)]
        if not chosen or not rejected:
            dropped.append(i)
            continue
        extra = {k: v for k, v in row.items() if k not in FIELDS}
        out.append({**extra, "prompt_ids": prompt, "chosen_ids": chosen, "rejected_ids": rejected})
    if dropped:
        msg = (
            f"tokenize_preference dropped {len(dropped)} of {n_rows} rows (indices {dropped[:10]}"
            f"{' ...' if len(dropped) > 10 else ''}) with no completion token left: max_length={max_length} is "
            "not longer than their prompt, or a completion is empty"
        )
        if not out:
            raise ValueError(msg + "; no row is left")
        warnings.warn(msg, UserWarning, stacklevel=2)
    return out


REF_KEYS = ("ref_chosen_logps", "ref_rejected_logps", "ref_chosen_entropy", "ref_rejected_entropy")


def collate_preference(examples: Sequence[dict], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Batch B examples into input_ids/attention_mask/completion_mask of shape [2B, T]: rows 0..B-1 are
    prompt+chosen, rows B..2B-1 prompt+rejected, right-padded. Precomputed reference fields (``REF_KEYS``) and a
    numeric ``neg_log_dispersion`` are stacked to [B] when every example has them.
    """
    if not examples:
        raise ValueError("cannot collate an empty batch")
    seqs, masks = [], []
    for side in ("chosen_ids", "rejected_ids"):
        for i, ex in enumerate(examples):
            if len(ex[side]) == 0:
                raise ValueError(f"example {i} has an empty {side}: every completion needs at least one token")
            seqs.append(list(ex["prompt_ids"]) + list(ex[side]))
            masks.append([0] * len(ex["prompt_ids"]) + [1] * len(ex[side]))
    t = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), t), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(seqs), t), dtype=torch.long)
    completion = torch.zeros((len(seqs), t), dtype=torch.long)
    for i, (s, m) in enumerate(zip(seqs, masks)):
        input_ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        attention[i, : len(s)] = 1
        completion[i, : len(m)] = torch.tensor(m, dtype=torch.long)
    batch = {"input_ids": input_ids, "attention_mask": attention, "completion_mask": completion}
    for key in (*REF_KEYS, "neg_log_dispersion"):
        if all(key in ex for ex in examples):
            batch[key] = torch.tensor([float(ex[key]) for ex in examples], dtype=torch.float32)
    return batch
