"""Renaming checkpoint keys by an ordered table of regular-expression rules (first match wins)."""

from __future__ import annotations

import re


def rename_key(key: str, rules: list[tuple[str, str]]) -> str | None:
    """``key`` rewritten by the first rule whose pattern matches it, or ``None`` when no rule does."""
    for pattern, replacement in rules:
        if re.match(pattern, key):
            return re.sub(pattern, replacement, key)
    return None
