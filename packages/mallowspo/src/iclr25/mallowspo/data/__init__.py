"""Data: TRL-format preference JSONL loaders (standard and conversational rows) and offline synthetic tasks."""

from .preference import (
    apply_chat_template_row,
    collate_preference,
    is_conversational,
    load_preference_jsonl,
    save_preference_jsonl,
    tokenize_preference,
)
from .synthetic import SyntheticSentiment

__all__ = [
    "SyntheticSentiment",
    "apply_chat_template_row",
    "collate_preference",
    "is_conversational",
    "load_preference_jsonl",
    "save_preference_jsonl",
    "tokenize_preference",
]
