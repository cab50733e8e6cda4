"""Exact certificates by exhaustive enumeration: every flip set within the budget (or, when fewer, every labeling up
to the global sign, whose negation gives the same duals and negated predictions) is retrained with the exact batched
SVM, and one solve gives the predictions of all test nodes, hence sample-wise and collective answers for several
budgets at once.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from iclr25.shared import progress

from .svm import solve_batch

_CHUNK = 2048


def count_flip_sets(m: int, budget: int, n_classes: int = 2) -> int:
    """Number of attacked labelings with at most ``budget`` changed labels."""
    return sum(math.comb(m, j) * (n_classes - 1) ** j for j in range(min(budget, m) + 1))


def enumeration_size(m: int, budget: int, n_classes: int = 2) -> int:
    """QPs the enumeration solves (binary: the smaller of flip sets and 2^(m-1) sign classes)."""
    flips = count_flip_sets(m, budget, n_classes)
    return min(flips, 2 ** (m - 1)) if n_classes == 2 else flips


def _flip_set_labelings(labels_hat: np.ndarray, budget: int, n_classes: int):
    """Yield chunks of attacked labelings (class ids / +-1) within the budget."""
    m = len(labels_hat)
    buf = []
    for size in range(min(budget, m) + 1):
        for subset in itertools.combinations(range(m), size):
            if n_classes == 2:
                lab = labels_hat.copy()
                lab[list(subset)] *= -1
                buf.append(lab)
            else:
                alts = [[k for k in range(n_classes) if k != labels_hat[j]] for j in subset]
                for choice in itertools.product(*alts):
                    lab = labels_hat.copy()
                    lab[list(subset)] = choice
                    buf.append(lab)
            if len(buf) >= _CHUNK:
                yield np.array(buf)
                buf = []
    if buf:
        yield np.array(buf)


def _sign_class_labelings(m: int):
    """Yield chunks of all labelings with y_0 = +1 (the other half are their negations)."""
    total = 2 ** (m - 1)
    bits = np.arange(m - 1)
    for start in range(0, total, _CHUNK):
        codes = np.arange(start, min(total, start + _CHUNK))
        rest = ((codes[:, None] >> bits[None, :]) & 1) * 2.0 - 1.0
        yield np.concatenate([np.ones((len(codes), 1)), rest], axis=1)


@dataclass
class EnumerationTable:
    """Per budget (row): worst margin and its labeling per test node; best collective count and its labeling."""

    budgets: list[int]
    worst_margin: np.ndarray  # [len(budgets), t]
    worst_labels: np.ndarray  # [len(budgets), t, m]
    best_count: np.ndarray  # [len(budgets)]
    best_count_labels: np.ndarray  # [len(budgets), m]
    n_qps: int
    best_count_correct: np.ndarray | None = None  # [len(budgets)] most correctly classified nodes one attack changes


def _margins(preds: np.ndarray, clean_dir) -> np.ndarray:
    """Binary: preds [B, t], clean_dir = sign s [t] -> s p. Multiclass: preds [B, t, K], clean class [t]."""
    if preds.ndim == 2:
        return preds * clean_dir[None, :]
    t = np.arange(preds.shape[1])
    own = preds[:, t, clean_dir]
    other = preds.copy()
    other[:, t, clean_dir] = -np.inf
    return own - other.max(axis=2)


def enumerate_certificates(
    q_ll: torch.Tensor,
    q_tl: torch.Tensor,
    labels_hat: np.ndarray,
    n_classes: int,
    c: float,
    budgets: list[int],
    clean_dir: np.ndarray,
    tol,
    backend: str = "auto",
    correct: np.ndarray | None = None,
) -> EnumerationTable:
    """Exhaustive certificates for every budget in ``budgets`` (binary labels +-1, multiclass ids).

    ``tol``: absolute tolerance, a scalar or one per test node (margin <= tol counts as changed). ``correct``: bool
    per test node; the table then also holds, per budget, the most correctly classified nodes one attack changes.
    """
    tol = np.broadcast_to(np.asarray(tol, dtype=float), (q_tl.shape[0],))
    correct = np.ones(q_tl.shape[0], bool) if correct is None else np.asarray(correct, dtype=bool)
    m, t = q_ll.shape[0], q_tl.shape[0]
    kmax = max(budgets)
    nb = len(budgets)
    worst = np.full((nb, t), np.inf)
    worst_lab = np.zeros((nb, t, m))
    best = np.full(nb, -1)
    best_lab = np.zeros((nb, m))
    best_correct = np.full(nb, -1)
    budgets_arr = np.asarray(budgets)
    use_signs = n_classes == 2 and 2 ** (m - 1) < count_flip_sets(m, kmax)
    chunks = _sign_class_labelings(m) if use_signs else _flip_set_labelings(labels_hat, kmax, n_classes)
    n_qps = 0
    for labs in progress(chunks, desc="enumerating labelings", leave=False):
        if n_classes == 2:
            ys = torch.as_tensor(labs, dtype=torch.float64)
            sol = solve_batch(q_ll, ys, c, backend=backend)
            preds = ((ys * sol.alpha) @ q_tl.T).numpy()
            n_qps += len(labs)
            if use_signs:  # add the negated labelings: same duals, negated predictions
                labs = np.concatenate([labs, -labs])
                preds = np.concatenate([preds, -preds])
            nflips = (labs != labels_hat[None, :]).sum(axis=1)
        else:
            signs = np.where(labs[:, None, :] == np.arange(n_classes)[None, :, None], 1.0, -1.0)  # [B, K, m]
            ys = torch.as_tensor(signs.reshape(-1, m))
            sol = solve_batch(q_ll, ys, c, backend=backend)
            preds = ((ys * sol.alpha) @ q_tl.T).numpy().reshape(len(labs), n_classes, t).transpose(0, 2, 1)
            n_qps += len(ys)
            nflips = (labs != labels_hat[None, :]).sum(axis=1)
        margins = _margins(preds, clean_dir)  # [B, t]
        is_changed = margins <= tol[None, :]
        changed = is_changed.sum(axis=1)
        changed_correct = (is_changed & correct[None, :]).sum(axis=1)
        within = nflips[None, :] <= budgets_arr[:, None]  # [nb, B]
        masked = np.where(within[:, :, None], margins[None], np.inf)  # [nb, B, t]
        arg = masked.argmin(axis=1)  # [nb, t]
        val = np.take_along_axis(masked, arg[:, None, :], axis=1)[:, 0, :]
        better = val < worst
        worst = np.where(better, val, worst)
        worst_lab = np.where(better[:, :, None], labs[arg], worst_lab)
        cnt = np.where(within, changed[None, :], -1)
        carg = cnt.argmax(axis=1)
        cval = cnt[np.arange(nb), carg]
        upd = cval > best
        best = np.where(upd, cval, best)
        best_lab = np.where(upd[:, None], labs[carg], best_lab)
        best_correct = np.maximum(best_correct, np.where(within, changed_correct[None, :], -1).max(axis=1))
    return EnumerationTable(list(budgets), worst, worst_lab, best, best_lab, n_qps, best_correct)
