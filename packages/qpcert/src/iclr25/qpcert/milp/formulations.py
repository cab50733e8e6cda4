"""The label-flip certificate as a mixed-integer linear program (the paper's single-level reformulation).

The inner bias-free SVM is replaced by its KKT conditions, which are necessary and sufficient (convex QP). Per
labelled node i and per one-vs-rest problem: binary b_i (label y_i = 2 b_i - 1), dual alpha_i in [0, C],
z_i = y_i alpha_i in [-C, C] (exact McCormick rows, y binary), multipliers u_i, v_i >= 0 of alpha >= 0 and
alpha <= C, complementarity binaries s_i (alpha_i = 0 side) and t_i (alpha_i = C side) with big-M constants, and the
stationarity row  y_i (Q z)_i - u_i + v_i = 1.  The predictions p_t = sum_j Q_tj z_j are linear in z.

Two exact linearisations of the product y_i (Q z)_i:
- ``"official"`` (the paper / official code): Z_ij = y_i z_j, m^2 variables with four McCormick rows each.
- ``"compact"`` (ours): g_i = y_i w_i with w_i = (Q z)_i, |w_i| <= R_i = C sum_j |Q_ij|: four rows per i, O(m)
  variables. Both are exact for binary y; they have the same integer-feasible set projected onto (b, alpha, z).
Big-M: u_i <= (R_i + 1) s_i, v_i <= (R_i + 1) t_i (valid since |y_i (Q z)_i| <= R_i), alpha_i <= C (1 - s_i),
alpha_i >= C t_i.

``fixed_alpha=True`` (when C max_i sum_j |Q_ij| <= 1, every alpha equals C for every labeling): z_i = C y_i and
no KKT block is needed.

Binary: one block, labels in {-1, +1}. Multiclass (exact one-vs-rest): K blocks, one-hot sum_k b^k_i = 1; the budget
counts nodes whose class changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .problem import MilpProblem


@dataclass
class KKTFormulation:
    problem: MilpProblem
    n_blocks: int
    b: list[np.ndarray] = field(default_factory=list)  # per block: label bits [m]
    z: list[np.ndarray] = field(default_factory=list)  # per block: y o alpha [m]
    alpha: list[np.ndarray] = field(default_factory=list)
    extra: list[dict] = field(default_factory=list)  # per block: u, v, s, t and g (compact) or Z (official)
    count: np.ndarray | None = None  # collective: per target node, 1 = prediction changed

    def labels(self, x: np.ndarray) -> np.ndarray:
        """Decode the attacked labels: +-1 (binary) or class ids (multiclass)."""
        bits = np.stack([np.round(x[bi]) for bi in self.b])
        if self.n_blocks == 1:
            return np.where(bits[0] > 0.5, 1.0, -1.0)
        return np.argmax(bits, axis=0)


def _kkt_block(prob: MilpProblem, q_ll: np.ndarray, c: float, formulation: str, fixed_alpha: bool, b: np.ndarray):
    m = q_ll.shape[0]
    z = prob.add_vars(m, -c, c)
    if fixed_alpha:
        for i in range(m):  # z_i = C (2 b_i - 1)
            prob.add_row([z[i], b[i]], [1.0, -2.0 * c], -c, -c)
        return z, None, {}
    radius = c * np.abs(q_ll).sum(axis=1)
    alpha = prob.add_vars(m, 0.0, c)
    u = prob.add_vars(m, 0.0, radius + 1.0)
    v = prob.add_vars(m, 0.0, radius + 1.0)
    s = prob.add_vars(m, 0, 1, integer=True)
    t = prob.add_vars(m, 0, 1, integer=True)
    for i in range(m):  # z_i = y_i alpha_i
        prob.add_row([z[i], alpha[i]], [1.0, -1.0], hi=0.0)
        prob.add_row([z[i], alpha[i]], [1.0, 1.0], lo=0.0)
        prob.add_row([z[i], alpha[i], b[i]], [1.0, -1.0, -2.0 * c], lo=-2.0 * c)
        prob.add_row([z[i], alpha[i], b[i]], [1.0, 1.0, -2.0 * c], hi=0.0)
        prob.add_row([u[i], s[i]], [1.0, -(radius[i] + 1.0)], hi=0.0)
        prob.add_row([alpha[i], s[i]], [1.0, c], hi=c)
        prob.add_row([v[i], t[i]], [1.0, -(radius[i] + 1.0)], hi=0.0)
        prob.add_row([alpha[i], t[i]], [1.0, -c], lo=0.0)
    extra = {"u": u, "v": v, "s": s, "t": t}
    if formulation == "compact":
        g = prob.add_vars(m, -radius, radius)
        extra["g"] = g
        for i in range(m):
            nz = np.flatnonzero(q_ll[i])
            w_idx, w_coef = z[nz], q_ll[i, nz]
            r2 = 2.0 * radius[i]
            # g_i = y_i w_i, exact for binary b_i (y = 2 b - 1) and |w_i| <= R_i
            prob.add_row(np.r_[g[i], w_idx, b[i]], np.r_[1.0, -w_coef, r2], hi=r2)
            prob.add_row(np.r_[g[i], w_idx, b[i]], np.r_[1.0, -w_coef, -r2], lo=-r2)
            prob.add_row(np.r_[g[i], w_idx, b[i]], np.r_[1.0, w_coef, -r2], hi=0.0)
            prob.add_row(np.r_[g[i], w_idx, b[i]], np.r_[1.0, w_coef, r2], lo=0.0)
            prob.add_row([g[i], u[i], v[i]], [1.0, -1.0, 1.0], 1.0, 1.0)  # stationarity
    elif formulation == "official":
        zz = prob.add_vars(m * m, -c, c).reshape(m, m)  # Z_ij = y_i z_j
        extra["Z"] = zz
        for i in range(m):
            for j in range(m):
                prob.add_row([zz[i, j], z[j], b[i]], [1.0, -1.0, 2.0 * c], hi=2.0 * c)
                prob.add_row([zz[i, j], z[j], b[i]], [1.0, -1.0, -2.0 * c], lo=-2.0 * c)
                prob.add_row([zz[i, j], z[j], b[i]], [1.0, 1.0, -2.0 * c], hi=0.0)
                prob.add_row([zz[i, j], z[j], b[i]], [1.0, 1.0, 2.0 * c], lo=0.0)
            nz = np.flatnonzero(q_ll[i])
            prob.add_row(np.r_[zz[i, nz], u[i], v[i]], np.r_[q_ll[i, nz], -1.0, 1.0], 1.0, 1.0)
    else:
        raise ValueError(f"unknown formulation {formulation!r}: expected 'compact' or 'official'")
    return z, alpha, extra


def build_certificate_milp(
    q_ll: np.ndarray,
    q_tl: np.ndarray,
    labels_hat: np.ndarray,
    n_classes: int,
    c: float,
    budget: int,
    objective: dict,
    formulation: str = "compact",
    fixed_alpha: bool = False,
    tol: float = 1e-4,
) -> KKTFormulation:
    """Build the MILP. ``n_classes == 2``: binary, ``labels_hat`` in {-1, +1}; otherwise class ids 0..K-1.

    ``objective``: ``{"kind": "margin", "row": r, "sign": s}`` (binary: min s p_r),
    ``{"kind": "margin", "row": r, "clean": c, "target": k}`` (multiclass: min p_c - p_k),
    ``{"kind": "collective", "signs": [...]}`` (binary) or ``{"kind": "collective", "clean": [...]}`` (multiclass):
    maximise the number of target rows whose margin drops to <= tol.
    """
    q_ll = np.asarray(q_ll, dtype=float)
    q_tl = np.atleast_2d(np.asarray(q_tl, dtype=float))
    m = q_ll.shape[0]
    blocks = 1 if n_classes == 2 else int(n_classes)
    prob = MilpProblem()
    form = KKTFormulation(problem=prob, n_blocks=blocks)
    for _ in range(blocks):
        b = prob.add_vars(m, 0, 1, integer=True)
        z, alpha, extra = _kkt_block(prob, q_ll, c, formulation, fixed_alpha, b)
        form.extra.append(extra)
        form.b.append(b)
        form.z.append(z)
        form.alpha.append(alpha)
    if blocks == 1:  # number of flips: sum over yhat=+1 of (1 - b) + sum over yhat=-1 of b
        pos = labels_hat > 0
        prob.add_row(form.b[0], np.where(pos, -1.0, 1.0), hi=budget - pos.sum())
    else:
        for i in range(m):
            prob.add_row([form.b[k][i] for k in range(blocks)], np.ones(blocks), 1.0, 1.0)
        keep = [form.b[int(labels_hat[i])][i] for i in range(m)]  # sum_i (1 - b^{c_i}_i) <= budget
        prob.add_row(keep, -np.ones(m), hi=budget - m)

    def logit(row: int, k: int):
        nz = np.flatnonzero(q_tl[row])
        return form.z[k][nz], q_tl[row, nz]

    kind = objective["kind"]
    if kind == "margin":
        r = int(objective["row"])
        if blocks == 1:
            idx, coef = logit(r, 0)
            prob.set_cost(idx, float(objective["sign"]) * coef)
        else:
            ic, cc = logit(r, int(objective["clean"]))
            ik, ck = logit(r, int(objective["target"]))
            prob.set_cost(np.r_[ic, ik], np.r_[cc, -ck])
    elif kind == "collective":
        rows = q_tl.shape[0]
        form.count = prob.add_vars(rows, 0, 1, integer=True)
        big = c * np.abs(q_tl).sum(axis=1) * (1 if blocks == 1 else 2) + abs(tol) + 1.0
        for r in range(rows):
            if blocks == 1:  # s_r p_r <= tol + P (1 - count_r)
                idx, coef = logit(r, 0)
                sgn = float(objective["signs"][r])
                prob.add_row(np.r_[idx, form.count[r]], np.r_[sgn * coef, big[r]], hi=tol + big[r])
            else:  # count_r <= sum_k e_rk;  p_c - p_k <= tol + P (1 - e_rk)
                clean = int(objective["clean"][r])
                others = [k for k in range(blocks) if k != clean]
                sel = prob.add_vars(len(others), 0, 1, integer=True)
                prob.add_row(np.r_[form.count[r], sel], np.r_[1.0, -np.ones(len(others))], hi=0.0)
                ic, cc = logit(r, clean)
                for e, k in zip(sel, others):
                    ik, ck = logit(r, k)
                    prob.add_row(np.r_[ic, ik, e], np.r_[cc, -ck, big[r]], hi=tol + big[r])
        prob.set_cost(form.count, -np.ones(rows))
    else:
        raise ValueError(f"unknown objective kind {kind!r}")
    return form


def mip_start(form: KKTFormulation, q_ll: np.ndarray, labels_hat: np.ndarray, alphas: np.ndarray, c: float):
    """A feasible start: the clean labels with their exact SVM solutions (``alphas`` [blocks, m])."""
    prob = form.problem
    x = np.zeros(prob.num_vars)
    lb, ub = np.asarray(prob.lb), np.asarray(prob.ub)
    for k in range(form.n_blocks):
        y = labels_hat if form.n_blocks == 1 else np.where(labels_hat == k, 1.0, -1.0)
        x[form.b[k]] = (y > 0).astype(float)
        a = np.asarray(alphas[k], dtype=float).copy()
        a[a < 1e-9 * c] = 0.0
        a[a > c * (1 - 1e-9)] = c
        if form.alpha[k] is None:
            x[form.z[k]] = c * y
            continue
        x[form.alpha[k]] = a
        z = y * a
        x[form.z[k]] = z
        g = y * (q_ll @ z)
        ex = form.extra[k]
        at_low, at_high = a <= 0, a >= c
        x[ex["s"]] = at_low
        x[ex["t"]] = at_high
        x[ex["u"]] = np.where(at_low, np.maximum(g - 1.0, 0.0), 0.0)
        x[ex["v"]] = np.where(at_high, np.maximum(1.0 - g, 0.0), 0.0)
        if "g" in ex:
            x[ex["g"]] = g
        else:
            x[ex["Z"]] = y[:, None] * z[None, :]
    return np.clip(x, lb, ub)
