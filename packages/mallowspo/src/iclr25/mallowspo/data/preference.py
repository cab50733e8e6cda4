"""Preference data in the TRL formats: JSONL rows {"prompt", "chosen", "rejected"}, either strings (standard) or
lists of {"role", "content"} messages (conversational, as UltraFeedback is distributed; the prompt may also be
implicit: no "prompt" key, and chosen/rejected are whole conversations sharing their first messages).

Loading checks every row; tokenisation renders conversational rows with the tokenizer's chat template, splits
prompt and completions like TRL (prompt ids = the common prefix of the tokenised prompt and prompt+completion) and
puts at most one BOS token at the start; collation stacks [chosen; rejected] right-padded with a completion mask.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from iclr25.shared import atomic_write

__all__ = [
    "apply_chat_template_row",
    "collate_preference",
    "is_conversational",
    "load_preference_jsonl",
    "save_preference_jsonl",
    "tokenize_preference",
]

FIELDS = ("prompt", "chosen", "rejected")


def _is_messages(x) -> bool:
    return isinstance(x, list) and len(x) > 0 and all(isinstance(m, dict) for m in x)


def is_conversational(row: dict) -> bool:
    """True when ``chosen`` and ``rejected`` are lists of {"role", "content"} messages (TRL conversational)."""
    return _is_messages(row.get("chosen")) and _is_messages(row.get("rejected"))


def _check_messages(messages, where: str) -> None:
    if not _is_messages(messages):
        raise ValueError(f"{where}: expected a non-empty list of {{'role', 'content'}} messages, got {messages!r:.80}")
    for j, m in enumerate(messages):
        if not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(
                f"{where}: message {j} needs string 'role' and 'content' (multimodal content lists are not "
                f"supported), got {m!r:.80}"
            )


def _split_implicit_prompt(chosen: list, rejected: list, where: str) -> tuple[list, list, list]:
    """Implicit prompt: the longest common prefix of messages (it must leave each side a non-empty completion)."""
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    n = min(n, len(chosen) - 1, len(rejected) - 1)
    if n < 1:
        raise ValueError(
            f"{where}: no 'prompt' key and chosen/rejected share no first message; give an explicit 'prompt' "
            "(a list of messages) or whole conversations that start with the same prompt messages"
        )
    return chosen[:n], chosen[n:], rejected[n:]


def _check_row(row, where: str) -> dict:
    """Validate one preference row (standard or conversational); returns it unchanged."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object with keys {FIELDS}")
    if is_conversational(row) or isinstance(row.get("chosen"), list) or isinstance(row.get("rejected"), list):
        for k in ("chosen", "rejected"):
            if k not in row:
                raise ValueError(f"{where}: missing key {k!r}; expected {FIELDS} (or chosen/rejected only)")
            _check_messages(row[k], f"{where}: {k!r}")
        if "prompt" in row:
            if isinstance(row["prompt"], str):
                raise ValueError(
                    f"{where}: 'prompt' is a string but chosen/rejected are conversations; give the prompt as a "
                    "list of messages, or drop the 'prompt' key if chosen/rejected already contain it (implicit "
                    "prompt)"
                )
            _check_messages(row["prompt"], f"{where}: 'prompt'")
        else:
            _split_implicit_prompt(row["chosen"], row["rejected"], where)
        return row
    missing = [k for k in FIELDS if k not in row]
    if missing:
        raise ValueError(f"{where}: missing keys {missing}; expected {FIELDS}")
    bad = [k for k in FIELDS if not isinstance(row[k], str)]
    if bad:
        raise ValueError(
            f"{where}: keys {bad} must be strings (TRL standard) or chosen/rejected lists of "
            "{'role', 'content'} messages (TRL conversational)"
        )
    return row


def apply_chat_template_row(row: dict, tokenizer, **template_kwargs) -> dict:
    """Render a conversational row to a standard (string) row with ``tokenizer.apply_chat_template``.

    prompt = the template of the prompt messages with the generation prompt (``continue_final_message`` instead
    when the prompt ends with an assistant message); chosen / rejected = the rendered continuation of
    prompt + completion messages after the prompt text (as TRL: the prompt is cut to the common prefix of the
    renderings, a no-op for ordinary templates). Standard rows are returned unchanged. Extra keys are kept.
    """
    if not is_conversational(row):
        return row
    _check_row(row, "row")
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            "conversational preference rows need a tokenizer with a chat_template (tokenizer.chat_template is None)"
        )
    if "prompt" in row:
        prompt_msgs, chosen_msgs, rejected_msgs = row["prompt"], row["chosen"], row["rejected"]
    else:
        prompt_msgs, chosen_msgs, rejected_msgs = _split_implicit_prompt(row["chosen"], row["rejected"], "row")
    cont = prompt_msgs[-1]["role"] == "assistant"
    prompt = tokenizer.apply_chat_template(
        prompt_msgs, tokenize=False, add_generation_prompt=not cont, continue_final_message=cont, **template_kwargs
    )
    full = {
        k: tokenizer.apply_chat_template(prompt_msgs + msgs, tokenize=False, **template_kwargs)
        for k, msgs in (("chosen", chosen_msgs), ("rejected", rejected_msgs))
    }
    for k in ("chosen", "rejected"):
        n = 0
        while n < min(len(prompt), len(full[k])) and prompt[n] == full[k][n]:
            n += 1
        prompt = prompt[:n]
    extra = {k: v for k, v in row.items() if k not in FIELDS}
    return {
        **extra,
        "prompt": prompt,
        "chosen": full["chosen"][len(prompt) :],
        "rejected": full["rejected"][len(prompt) :],
    }


def _tokenizer_adds_bos(tokenizer) -> bool:
    """Whether ``tokenizer(text)`` (special tokens on) puts its BOS token first."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    with_sp = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    return len(with_sp) > 0 and with_sp[0] == bos and (len(without) == 0 or without[0] != bos)


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
            _check_row(row, f"{path}:{lineno}")
            rows.append({k: row[k] for k in row})
    if not rows:
        raise ValueError(f"{path}: no preference rows")
    return rows


def save_preference_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    """Write rows atomically; returns the number of rows. Each row must be a valid standard or conversational row."""
    rows = list(rows)
    for i, row in enumerate(rows):
        _check_row(row, f"row {i}")
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
    add_bos: bool | None = None,
    chat_template_kwargs: dict | None = None,
) -> list[dict]:
    """Rows -> {"prompt_ids", "chosen_ids", "rejected_ids"} (lists of ints), keeping extra keys.

    Conversational rows (lists of messages, explicit or implicit prompt) are first rendered with the tokenizer's
    chat template (:func:`apply_chat_template_row`); the rendered text is then tokenised like a standard row, with
    ``add_special_tokens=False`` so that the template's own special tokens are kept as they are.

    BOS: ``add_bos=None`` puts one BOS token first exactly when the tokenizer would (``tokenizer(text)`` starts
    with ``bos_token_id``); ``True`` / ``False`` force it on / off. A prompt that already starts with BOS (a chat
    template that emits it, or BOS text in the prompt) keeps exactly one: repeated leading BOS tokens are
    collapsed, so a template that emits BOS plus a tokenizer that adds one never gives two.

    EOS: appended to both completions (as TRL does) unless the completion already ends with it (chat templates
    usually close the assistant turn with it). Prompts longer than ``max_prompt_length`` keep their end (and their
    leading BOS); then each prompt+completion is cut to ``max_length`` keeping its start. Rows left without any
    completion token (``max_length`` not longer than the prompt, or an empty completion without EOS) are dropped
    with a ``UserWarning`` giving their count and indices; if no row is left, ``ValueError``.
    """
    if max_length is not None and (isinstance(max_length, bool) or int(max_length) < 1):
        raise ValueError(f"max_length must be a positive integer or None, got {max_length!r}")
    if max_prompt_length is not None and (isinstance(max_prompt_length, bool) or int(max_prompt_length) < 0):
        raise ValueError(f"max_prompt_length must be a non-negative integer or None, got {max_prompt_length!r}")
    if add_bos not in (None, True, False):
        raise ValueError(f"add_bos must be None (as the tokenizer does), True or False, got {add_bos!r}")
    eos = tokenizer.eos_token_id if add_eos else None
    if add_eos and eos is None:
        raise ValueError("add_eos=True but the tokenizer has no eos_token_id")
    bos = getattr(tokenizer, "bos_token_id", None)
    if add_bos and bos is None:
        raise ValueError("add_bos=True but the tokenizer has no bos_token_id")
    want_bos = _tokenizer_adds_bos(tokenizer) if add_bos is None else add_bos
    out = []
    dropped: list[int] = []
    n_rows = 0
    for i, row in enumerate(rows):
        n_rows += 1
        if is_conversational(row):
            row = apply_chat_template_row(row, tokenizer, **(chat_template_kwargs or {}))
        else:
            _check_row(row, f"row {i}")
        p = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        pc = tokenizer(row["prompt"] + row["chosen"], add_special_tokens=False)["input_ids"]
        pr = tokenizer(row["prompt"] + row["rejected"], add_special_tokens=False)["input_ids"]
        n = min(_common_prefix(p, pc), _common_prefix(p, pr))
        prompt, chosen, rejected = list(p[:n]), list(pc[n:]), list(pr[n:])
        has_bos = False
        if bos is not None:
            k = 0
            while k < len(prompt) and prompt[k] == bos:
                k += 1
            has_bos = k > 0 or want_bos
            prompt = prompt[k:]
        if eos is not None:
            chosen = chosen if chosen[-1:] == [eos] else chosen + [eos]
            rejected = rejected if rejected[-1:] == [eos] else rejected + [eos]
        if max_prompt_length is not None and len(prompt) + has_bos > max_prompt_length:
            keep = max_prompt_length - has_bos
            prompt = prompt[len(prompt) - keep :] if keep > 0 else []
            has_bos = has_bos and max_prompt_length > 0
        if has_bos:
            prompt = [bos] + prompt
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
