"""Per-group metrics: accuracy and log-loss, their worst group."""

from __future__ import annotations

import numpy as np

from ._validation import check_lengths, encode_groups

__all__ = ["group_accuracy", "worst_group_accuracy", "group_log_loss", "worst_group_log_loss"]


def group_accuracy(y_true, y_pred, groups) -> dict:
    """{group label: accuracy}."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    check_lengths(y_true=y_true, y_pred=y_pred, groups=np.asarray(groups))
    codes, known = encode_groups(groups)
    correct = (y_true == y_pred).astype(np.float64)
    acc = np.bincount(codes, weights=correct) / np.bincount(codes)
    return {k: float(a) for k, a in zip(known.tolist(), acc)}


def worst_group_accuracy(y_true, y_pred, groups) -> float:
    return min(group_accuracy(y_true, y_pred, groups).values())


def group_log_loss(y_codes, proba, groups, eps: float = 1e-15) -> dict:
    """{group label: mean -log p(y|x)}; ``y_codes`` are column indices of ``proba`` [N, C]."""
    proba = np.asarray(proba, dtype=np.float64)
    y_codes = np.asarray(y_codes)
    check_lengths(y=y_codes, proba=proba, groups=np.asarray(groups))
    if proba.ndim != 2:
        raise ValueError(f"proba must be [N, C], got shape {proba.shape}")
    if y_codes.size and (y_codes.min() < 0 or y_codes.max() >= proba.shape[1]):
        raise ValueError(f"labels must be class codes in 0..{proba.shape[1] - 1}")
    codes, known = encode_groups(groups)
    nll = -np.log(np.clip(proba[np.arange(len(y_codes)), y_codes], eps, 1.0))
    loss = np.bincount(codes, weights=nll) / np.bincount(codes)
    return {k: float(v) for k, v in zip(known.tolist(), loss)}


def worst_group_log_loss(y_codes, proba, groups, eps: float = 1e-15) -> float:
    return max(group_log_loss(y_codes, proba, groups, eps).values())
