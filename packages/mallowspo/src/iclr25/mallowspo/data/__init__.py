"""Data: TRL-format preference JSONL loaders and offline synthetic tasks."""

from .preference import collate_preference, load_preference_jsonl, save_preference_jsonl, tokenize_preference
from .synthetic import SyntheticSentiment

__all__ = [
    "SyntheticSentiment",
    "collate_preference",
    "load_preference_jsonl",
    "save_preference_jsonl",
    "tokenize_preference",
]
