"""The learner: the bias-free soft-margin kernel SVM that an infinite-width network trained with the hinge loss
becomes (the paper's setting), solved exactly and batched over many labelings.

Dual (no equality constraint because there is no bias):  min_a 1/2 a^T (y y^T o Q) a - 1^T a,  0 <= a <= C.
Prediction: p_t = sum_j a_j y_j Q_tj; p >= 0 is class +1 (official tie rule).

Solver: cyclic coordinate descent (the batched kernel of :mod:`iclr25.qpcert.kernels`), then an active-set polish
(solve the free block exactly with the bounded coordinates fixed, drop variables that leave the box, repeat), then a
KKT check; rounds repeat until every problem's natural KKT residual is below ``tol``. The returned ``kkt`` is that
residual, so exactness is verified, not assumed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .kernels import box_qp, kkt_residual

_CHUNK = 1 << 15


@dataclass
class BatchSolution:
    alpha: torch.Tensor  # [B, m]
    kkt: torch.Tensor  # [B] natural KKT residual
    converged: torch.Tensor  # [B] bool, kkt <= tol


def validate_kernel(q, name: str = "Q", psd_tol: float = 1e-8) -> torch.Tensor:
    """Float64 copy of a symmetric positive semi-definite kernel matrix, or a clear ValueError."""
    t = torch.as_tensor(np.asarray(q) if not isinstance(q, torch.Tensor) else q).detach().to(torch.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise ValueError(f"{name} must be a square [m, m] kernel matrix, got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf entries")
    scale = max(1.0, float(t.abs().max())) if t.numel() else 1.0
    if not torch.allclose(t, t.T, rtol=0.0, atol=1e-10 * scale):
        raise ValueError(f"{name} must be symmetric")
    t = 0.5 * (t + t.T)
    if t.numel():
        lam_min = float(torch.linalg.eigvalsh(t)[0])
        if lam_min < -psd_tol * scale:
            raise ValueError(f"{name} is not positive semi-definite: smallest eigenvalue {lam_min:.3e}")
    return t


def _check_c(c) -> float:
    if not isinstance(c, (int, float, np.floating, np.integer)) or not np.isfinite(c) or c <= 0:
        raise ValueError(f"C must be a positive finite number, got {c!r}")
    return float(c)


def _free_block_solution(p_full, free, bound_val, current):
    """Solution of the KKT system on the free block (bounded coordinates fixed) closest to ``current``."""
    eye = torch.eye(p_full.shape[-1], dtype=p_full.dtype, device=p_full.device)
    fixed = torch.where(free, torch.zeros_like(current), bound_val)
    mask = free[:, :, None] & free[:, None, :]
    mat = torch.where(mask, p_full, eye.expand_as(p_full) * (~free[:, :, None]).to(p_full.dtype))
    rhs = torch.where(free, 1.0 - (p_full @ fixed[:, :, None]).squeeze(-1), fixed)
    evals, evecs = torch.linalg.eigh(mat)
    cutoff = 1e-11 * evals.abs().amax(dim=-1, keepdim=True).clamp_min(1e-300)
    big = evals.abs() > cutoff
    inv = torch.where(big, 1.0 / torch.where(big, evals, 1.0), 0.0)
    resid = rhs - (mat @ current[:, :, None]).squeeze(-1)
    coef = evecs.transpose(-1, -2) @ resid[:, :, None]  # gradient of the face objective, negated, in the eigenbasis
    # on a singular face the objective decreases linearly along the null-space part of the negative gradient:
    # follow it far (the caller's ratio test stops at the first bound); numerical noise (< 1e-10) is ignored
    null = (~big)[:, :, None] & (coef.abs() > 1e-10)
    coef = torch.where(null, coef * 1e12, coef * inv[:, :, None])
    return current + (evecs @ coef).squeeze(-1)


def _polish(q: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor, c: float, iterations: int | None = None):
    """Primal active-set refinement from a feasible iterate (Lawson-Hanson style, batched).

    Solve the free block exactly; if the solution leaves the box, step towards it until the first bound is hit and
    fix that coordinate; otherwise release the bounded coordinates whose gradient has the wrong sign.
    """
    m = q.shape[0]
    iterations = 3 * m + 5 if iterations is None else iterations
    out = alpha.clamp(0.0, c).clone()
    rows = torch.arange(out.shape[0], device=out.device)
    y_act = y
    cur = out
    lower, upper = cur <= 0, cur >= c
    for _ in range(iterations):
        if rows.numel() == 0:
            break
        p_full = y_act[:, :, None] * q[None] * y_act[:, None, :]
        free = ~lower & ~upper
        bound_val = torch.where(upper, torch.full_like(cur, c), torch.zeros_like(cur))
        cur = torch.where(free, cur, bound_val)
        sol = _free_block_solution(p_full, free, bound_val, cur)
        low, high = free & (sol < 0), free & (sol > c)
        infeasible = (low | high).any(dim=-1)
        direction = sol - cur
        t_low = torch.where(low, cur / (cur - sol).clamp_min(1e-300), torch.ones_like(cur))
        t_high = torch.where(high, (c - cur) / direction.clamp_min(1e-300), torch.ones_like(cur))
        t = torch.minimum(t_low, t_high).amin(dim=-1).clamp(0.0, 1.0)
        stepped = (cur + t[:, None] * direction).clamp(0.0, c)
        new = torch.where(infeasible[:, None], stepped, sol.clamp(0.0, c))
        hit_low = infeasible[:, None] & free & (new <= 1e-14 * c)
        hit_high = infeasible[:, None] & free & (new >= c * (1 - 1e-14))
        g = (p_full @ new[:, :, None]).squeeze(-1) - 1.0
        release = ~infeasible[:, None] & ((lower & (g < -1e-12)) | (upper & (g > 1e-12)))
        out[rows] = new
        lower = (lower | hit_low) & ~release
        upper = (upper | hit_high) & ~release
        active = infeasible | release.any(dim=-1)
        rows, cur, y_act = rows[active], new[active], y_act[active]
        lower, upper = lower[active], upper[active]
    return out


def solve_batch(
    q: torch.Tensor,
    y: torch.Tensor,
    c: float,
    tol: float = 1e-9,
    sweeps: int = 10,
    max_rounds: int = 200,
    alpha0: torch.Tensor | None = None,
    backend: str = "auto",
) -> BatchSolution:
    """Solve the bias-free SVM dual for every labeling (row) of ``y`` [B, m] on the shared kernel ``q`` [m, m]."""
    c = _check_c(c)
    y = y.to(q.dtype)
    alpha = torch.zeros_like(y) if alpha0 is None else alpha0.to(q.dtype).clone()
    kkt = torch.full((y.shape[0],), float("inf"), dtype=q.dtype, device=q.device)
    todo = torch.arange(y.shape[0], device=q.device)
    for _ in range(max_rounds):
        if todo.numel() == 0:
            break
        for start in range(0, todo.numel(), _CHUNK):
            idx = todo[start : start + _CHUNK]
            a, r = box_qp(q, y[idx], alpha[idx], c, sweeps, backend=backend)
            cand = _polish(q, y[idx], a, c)
            r_cand = kkt_residual(q, y[idx], cand, c)
            take = r_cand < r
            alpha[idx] = torch.where(take[:, None], cand, a)
            kkt[idx] = torch.minimum(r, r_cand)
        todo = todo[kkt[todo] > tol]
    if todo.numel():
        warnings.warn(
            f"{todo.numel()} of {y.shape[0]} SVM problems did not reach KKT residual {tol:g} in {max_rounds} rounds "
            f"(largest {float(kkt.max()):.2e}); see BatchSolution.converged",
            RuntimeWarning,
            stacklevel=2,
        )
    return BatchSolution(alpha=alpha, kkt=kkt, converged=kkt <= tol)


def predict_scores(q_tl: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """p = Q_tl (y o a) for every labeling: [B, t] (or [t] for 1-D y/alpha)."""
    return (y * alpha) @ q_tl.T


class KernelSVM:
    """Bias-free soft-margin kernel SVM; binary labels in {-1, +1} (or any two values), several classes one-vs-rest.

    Attributes after ``fit``: ``alpha_`` ([m] binary, [K, m] one-vs-rest), ``classes_``, ``kkt_residual_`` (float,
    the largest natural KKT residual over the OvR problems), ``y_signs_`` (the +-1 labels used per problem).
    """

    def __init__(self, C: float = 1.0, tol: float = 1e-9, backend: str = "auto") -> None:
        self.C = _check_c(C)
        self.tol = float(tol)
        self.backend = backend

    def fit(self, Q, y) -> KernelSVM:
        q = validate_kernel(Q, "Q_train_train")
        labels = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y).reshape(-1)
        if labels.shape[0] != q.shape[0]:
            raise ValueError(f"y has {labels.shape[0]} labels but the kernel has {q.shape[0]} rows")
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise ValueError("y contains NaN or inf")
        classes = np.unique(labels)
        if classes.size == 1 and classes[0] in (-1, 1):
            classes = np.array([-1, 1])
        if classes.size < 2 and labels.size > 0:
            raise ValueError("y must contain at least two classes (or be given as +-1 signs)")
        self.classes_ = classes
        self.binary_ = classes.size <= 2
        if self.binary_:
            signs = np.where(labels == classes[-1], 1.0, -1.0)[None, :]
        else:
            signs = np.where(labels[None, :] == classes[:, None], 1.0, -1.0)
        ys = torch.as_tensor(signs, dtype=torch.float64)
        sol = solve_batch(q, ys, self.C, tol=self.tol, backend=self.backend)
        self.y_signs_ = ys
        alpha = sol.alpha
        self.alpha_ = alpha[0] if self.binary_ else alpha
        self.kkt_residual_ = float(sol.kkt.max()) if sol.kkt.numel() else 0.0
        self.converged_ = bool(sol.converged.all())
        return self

    def _check_fitted(self, q_tl) -> torch.Tensor:
        if not hasattr(self, "alpha_"):
            raise ValueError("KernelSVM is not fitted: call fit(Q, y) first")
        t = torch.as_tensor(np.asarray(q_tl) if not isinstance(q_tl, torch.Tensor) else q_tl).to(torch.float64)
        if t.ndim != 2 or t.shape[1] != self.y_signs_.shape[1]:
            raise ValueError(f"Q_test_train must be [t, m] with m = {self.y_signs_.shape[1]}, got {tuple(t.shape)}")
        return t

    def decision_function(self, Q_test_train) -> torch.Tensor:
        """[t] scores (binary) or [t, K] one-vs-rest scores."""
        t = self._check_fitted(Q_test_train)
        scores = predict_scores(t, self.y_signs_, self.alpha_ if not self.binary_ else self.alpha_[None])
        return scores[0] if self.binary_ else scores.T

    def predict(self, Q_test_train) -> np.ndarray:
        scores = self.decision_function(Q_test_train)
        if self.binary_:
            return np.where(scores.numpy() >= 0, self.classes_[-1], self.classes_[0])
        return self.classes_[scores.argmax(dim=1).numpy()]
