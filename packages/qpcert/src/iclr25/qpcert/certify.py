"""Exact label-flipping certificates (the paper's QPCert/LabelCert) for the NTK-SVM of part 1.

Question: can an adversary who changes at most k training labels change the prediction of a test node
(sample-wise), or of how many test nodes at once (collective)? Three exact paths, all forced with ``method=``:

- ``"sort"``: when C max_i sum_j |Q_ij| <= 1 (over the labelled nodes) every dual equals C for every labeling, so
  p_t = C sum_j y_j Q_tj is linear in the labels; the sample-wise certificate is a sort of per-node gains; the
  collective one is a small MILP without the KKT block.
- ``"enumerate"``: retrain the exact SVM on every flip set within the budget (batched; Triton on GPU).
- ``"milp"``: the KKT reformulation (:mod:`iclr25.qpcert.milp`) with HiGHS / SCIP / scipy / Gurobi.

``method="auto"`` picks sort (sample-wise, in its regime), else enumeration when it needs at most ``enum_limit`` QPs,
else the MILP. Margins within ``tol`` of 0 count as *not certified*; a time-out or solver trouble gives "unknown",
never "certified"; every "not certified" witness is retrained before it is reported. Tie rule: p >= 0 is class +1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr25.shared import progress

from .config import CertifyConfig
from .enumeration import enumerate_certificates, enumeration_size
from .milp import build_certificate_milp, solve
from .milp.formulations import mip_start
from .svm import _check_c, solve_batch, validate_kernel

METHODS = ("auto", "sort", "enumerate", "milp")
MODES = ("samplewise", "collective")


@dataclass
class CertificateResult:
    mode: str
    method: str  # the path that produced the answer
    budget: int  # number of label flips allowed
    test_idx: np.ndarray
    status: list[str]  # "certified" | "not_certified" | "unknown", in test_idx order
    margin: np.ndarray  # worst-case margin towards the clean prediction (exact where margin_exact)
    flips: list  # witness flip sets (node ids) for "not_certified" nodes, else None
    clean_prediction: np.ndarray  # +-1 (binary) or class ids
    clean_margin: np.ndarray
    margin_exact: np.ndarray  # bool per node: margin is the exact optimum (not only a bound)
    flipped_labels: list = field(default_factory=list)  # multiclass: the attacked labels of each witness
    n_changed: int | None = None  # collective: nodes changed by the best verified shared attack
    n_changed_bound: int | None = None  # collective: proven upper bound on that number
    collective_flips: np.ndarray | None = None
    seconds: float = 0.0

    @property
    def certified_ratio(self) -> float:
        if not len(self.status):
            return float("nan")
        if self.mode == "collective":
            return (len(self.status) - self.n_changed_bound) / len(self.status)
        return float(np.mean([s == "certified" for s in self.status]))


@dataclass
class _Setup:
    q_ll: torch.Tensor
    q_tl: torch.Tensor
    train_idx: np.ndarray
    test_idx: np.ndarray
    labels_hat: np.ndarray  # binary +-1 or class ids 0..K-1
    classes: np.ndarray
    n_classes: int
    c: float
    alphas: np.ndarray  # [blocks, m]
    clean_scores: np.ndarray  # [t] or [t, K]
    clean_dir: np.ndarray  # binary: sign s [t]; multiclass: clean class [t]
    clean_margin: np.ndarray

    @property
    def m(self) -> int:
        return self.q_ll.shape[0]

    @property
    def sort_regime(self) -> bool:
        return self.c * float(self.q_ll.abs().sum(1).max()) <= 1.0


def _signs_for(labels: np.ndarray, n_classes: int) -> np.ndarray:
    """[blocks, m] +-1 label signs of the one-vs-rest problems (one block for binary)."""
    if n_classes == 2:
        return np.asarray(labels, dtype=float)[None, :]
    return np.where(np.asarray(labels)[None, :] == np.arange(n_classes)[:, None], 1.0, -1.0)


def _scores(setup: _Setup, labels: np.ndarray, backend: str = "auto") -> np.ndarray:
    """Retrain on ``labels`` [B, m]; return test scores [B, t] (binary) or [B, t, K]."""
    labels = np.atleast_2d(labels)
    b = labels.shape[0]
    signs = np.concatenate([_signs_for(lab, setup.n_classes) for lab in labels])
    ys = torch.as_tensor(signs)
    sol = solve_batch(setup.q_ll, ys, setup.c, backend=backend)
    preds = ((ys * sol.alpha) @ setup.q_tl.T).numpy()
    if setup.n_classes == 2:
        return preds
    return preds.reshape(b, setup.n_classes, -1).transpose(0, 2, 1)


def _margin_of(setup: _Setup, scores: np.ndarray, rows=None) -> np.ndarray:
    """Margins towards the clean prediction for scores [B, t(, K)] -> [B, t]."""
    d = setup.clean_dir if rows is None else setup.clean_dir[rows]
    if setup.n_classes == 2:
        return scores * d[None, :]
    t = np.arange(scores.shape[1])
    own = scores[:, t, d]
    other = scores.copy()
    other[:, t, d] = -np.inf
    return own - other.max(axis=2)


def _prepare(Q, y, train_idx, test_idx, C) -> _Setup:
    c = _check_c(C)
    train_idx = np.asarray(train_idx, dtype=np.int64).reshape(-1)
    test_idx = np.asarray(test_idx, dtype=np.int64).reshape(-1)
    q = torch.as_tensor(np.asarray(Q) if not isinstance(Q, torch.Tensor) else Q).detach().to(torch.float64)
    if q.ndim != 2 or q.shape[0] != q.shape[1]:
        raise ValueError(f"Q must be the full [n, n] kernel, got shape {tuple(q.shape)}")
    n = q.shape[0]
    y = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y).reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"y must hold the labels of all {n} nodes, got {y.shape[0]}")
    for name, idx in (("train_idx", train_idx), ("test_idx", test_idx)):
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"{name} has node ids outside [0, {n})")
        if len(np.unique(idx)) != len(idx):
            raise ValueError(f"{name} contains duplicates")
    if train_idx.size == 0:
        raise ValueError("train_idx is empty")
    both = np.concatenate([train_idx, test_idx])
    validate_kernel(q[np.ix_(both, both)], "Q (labelled and test nodes)")
    q_ll = q[np.ix_(train_idx, train_idx)].contiguous()
    q_tl = q[np.ix_(test_idx, train_idx)].contiguous()
    y_train = y[train_idx]
    classes = np.unique(y_train)
    if classes.size == 1 and classes[0] in (-1, 1):
        classes = np.array([-1, 1])
    if classes.size < 2:
        raise ValueError("the labelled nodes must contain at least two classes")
    n_classes = int(classes.size)
    ids = np.searchsorted(classes, y_train)
    labels_hat = np.where(ids == 1, 1.0, -1.0) if n_classes == 2 else ids
    signs = torch.as_tensor(_signs_for(labels_hat, n_classes))
    sol = solve_batch(q_ll, signs, c)
    alphas = sol.alpha.numpy()
    scores = ((signs * sol.alpha) @ q_tl.T).numpy()
    if n_classes == 2:
        clean_scores = scores[0]
        clean_dir = np.where(clean_scores >= 0, 1.0, -1.0)
        clean_margin = clean_scores * clean_dir
    else:
        clean_scores = scores.T
        clean_dir = clean_scores.argmax(axis=1)
        setup_tmp = clean_scores[None]
        t = np.arange(len(clean_dir))
        other = setup_tmp.copy()
        other[:, t, clean_dir] = -np.inf
        clean_margin = (setup_tmp[:, t, clean_dir] - other.max(axis=2))[0]
    return _Setup(q_ll, q_tl, train_idx, test_idx, labels_hat, classes, n_classes, c, alphas, clean_scores,
                  clean_dir, clean_margin)  # fmt: skip


def resolve_budget(budget, m: int) -> int:
    """A count (int) or a fraction of the labelled nodes (float in [0, 1]): k = floor(delta m) (official rule)."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float, np.integer, np.floating)):
        raise TypeError(f"budget must be an int (count) or a float fraction, got {type(budget).__name__}")
    if isinstance(budget, (float, np.floating)):
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"a fractional budget must lie in [0, 1], got {budget}")
        return int(budget * m)
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    return int(min(budget, m))


def _labels_to_flips(setup: _Setup, labels: np.ndarray) -> np.ndarray:
    return setup.train_idx[np.flatnonzero(np.asarray(labels) != setup.labels_hat)]


def _user_labels(setup: _Setup, labels: np.ndarray) -> np.ndarray:
    lab = np.asarray(labels)
    if setup.n_classes == 2:
        return np.where(lab > 0, setup.classes[1], setup.classes[0])
    return setup.classes[lab.astype(int)]


def _finish_samplewise(setup, budget, method, margins, exact, witnesses, unknown, tol, t0) -> CertificateResult:
    """Verify every witness by retraining, then set statuses."""
    t = len(setup.test_idx)
    status, flips, flipped = ["certified"] * t, [None] * t, [None] * t
    margins = np.asarray(margins, dtype=float).copy()
    exact = np.asarray(exact, dtype=bool).copy()
    rows = [r for r in range(t) if witnesses[r] is not None]
    if rows:
        verified = _margin_of(setup, _scores(setup, np.stack([witnesses[r] for r in rows])))
        for i, r in enumerate(rows):
            actual = verified[i, r]
            if actual <= tol:
                status[r] = "not_certified"
                flips[r] = _labels_to_flips(setup, witnesses[r])
                flipped[r] = _user_labels(setup, witnesses[r])[np.asarray(witnesses[r]) != setup.labels_hat]
                margins[r] = actual if exact[r] else min(margins[r], actual)
            else:
                status[r] = "unknown"
    for r in range(t):
        if unknown[r] and status[r] != "not_certified":
            status[r] = "unknown"
        elif witnesses[r] is None and not unknown[r] and margins[r] <= tol:
            status[r] = "unknown"  # no verified witness for a non-positive margin: never claim either way
    return CertificateResult(
        mode="samplewise", method=method, budget=budget, test_idx=setup.test_idx, status=status, margin=margins,
        flips=flips, clean_prediction=_user_labels(setup, setup.clean_dir) if setup.n_classes == 2
        else setup.classes[setup.clean_dir], clean_margin=setup.clean_margin, margin_exact=exact,
        flipped_labels=flipped, seconds=time.perf_counter() - t0,
    )  # fmt: skip


def _sort_samplewise(setup: _Setup, budget: int, tol: float, t0: float) -> CertificateResult:
    q_tl = setup.q_tl.numpy()
    c, t, m = setup.c, q_tl.shape[0], setup.m
    margins, witnesses = np.zeros(t), [None] * t
    for r in range(t):
        if setup.n_classes == 2:
            gains = 2.0 * c * setup.clean_dir[r] * setup.labels_hat * q_tl[r]
            order = np.argsort(-gains, kind="stable")[:budget]
            chosen = order[gains[order] > 0]
            margins[r] = setup.clean_margin[r] - gains[chosen].sum()
            lab = setup.labels_hat.copy()
            lab[chosen] *= -1
        else:
            cc = setup.clean_dir[r]
            best = (np.inf, None)
            for k in range(setup.n_classes):
                if k == cc:
                    continue
                d = np.zeros((setup.n_classes, m))  # contribution of label a at node j to (p_c - p_k) / 2C
                d[cc], d[k] = q_tl[r], -q_tl[r]
                cur = d[setup.labels_hat, np.arange(m)]
                new_label = d.argmin(axis=0)
                gains = 2.0 * c * (cur - d.min(axis=0))
                base = 2.0 * c * cur.sum()
                order = np.argsort(-gains, kind="stable")[:budget]
                chosen = order[gains[order] > 0]
                val = base - gains[chosen].sum()
                if val < best[0]:
                    lab = setup.labels_hat.copy()
                    lab[chosen] = new_label[chosen]
                    best = (val, lab)
            margins[r], lab = best
        witnesses[r] = lab if margins[r] <= tol else None
    return _finish_samplewise(setup, budget, "sort", margins, np.ones(t, bool), witnesses, [False] * t, tol, t0)


def _enumerate_samplewise(setup, budget, tol, backend, t0) -> CertificateResult:
    table = enumerate_certificates(setup.q_ll, setup.q_tl, setup.labels_hat, setup.n_classes, setup.c, [budget],
                                   setup.clean_dir, tol, backend)  # fmt: skip
    margins = table.worst_margin[0]
    witnesses = [table.worst_labels[0, r] if margins[r] <= tol else None for r in range(len(margins))]
    t = len(margins)
    return _finish_samplewise(setup, budget, "enumerate", margins, np.ones(t, bool), witnesses, [False] * t, tol, t0)


def _milp_samplewise(setup, budget, tol, solver, time_limit, formulation, exact_margin, t0) -> CertificateResult:
    q_ll, q_tl = setup.q_ll.numpy(), setup.q_tl.numpy()
    t = q_tl.shape[0]
    margins, exact, witnesses, unknown = np.zeros(t), np.zeros(t, bool), [None] * t, [False] * t
    for r in progress(range(t), desc="MILP certificates", leave=False):
        if setup.n_classes == 2:
            objectives = [{"kind": "margin", "row": r, "sign": setup.clean_dir[r]}]
        else:
            cc = int(setup.clean_dir[r])
            objectives = [{"kind": "margin", "row": r, "clean": cc, "target": k} for k in range(setup.n_classes)
                          if k != cc]  # fmt: skip
        vals, all_exact, unk = [], True, False
        for obj in objectives:
            form = build_certificate_milp(q_ll, q_tl, setup.labels_hat, setup.n_classes, setup.c, budget, obj,
                                          formulation=formulation, tol=tol)  # fmt: skip
            form.problem.start = mip_start(form, q_ll, setup.labels_hat, setup.alphas, setup.c)
            stop = None if exact_margin else tol
            sol = solve(form.problem, solver, time_limit=time_limit, stop_below=stop, stop_above=stop)
            if sol.x is not None and sol.objective <= tol:
                witnesses[r] = form.labels(sol.x)
                vals.append(sol.objective)
                all_exact &= sol.status == "optimal"
                if not exact_margin:
                    break
            elif sol.bound > tol or (sol.status == "optimal" and sol.objective > tol):
                vals.append(sol.objective if sol.status == "optimal" else sol.bound)
                all_exact &= sol.status == "optimal"
            else:
                unk, all_exact = True, False
                vals.append(sol.bound)
        margins[r] = min(vals)
        exact[r] = all_exact and not unk
        unknown[r] = unk
    return _finish_samplewise(setup, budget, "milp", margins, exact, witnesses, unknown, tol, t0)


def _collective_result(setup, budget, method, labels, n_bound, exact, tol, t0) -> CertificateResult:
    t = len(setup.test_idx)
    margins = _margin_of(setup, _scores(setup, labels[None]))[0]
    changed = margins <= tol
    n_changed = int(changed.sum())
    n_bound = max(int(n_bound), n_changed)
    exact = exact and n_bound == n_changed
    status = ["not_certified" if ch else ("certified" if exact else "unknown") for ch in changed]
    flips = _labels_to_flips(setup, labels)
    return CertificateResult(
        mode="collective", method=method, budget=budget, test_idx=setup.test_idx, status=status, margin=margins,
        flips=[flips if ch else None for ch in changed],
        clean_prediction=_user_labels(setup, setup.clean_dir) if setup.n_classes == 2
        else setup.classes[setup.clean_dir], clean_margin=setup.clean_margin, margin_exact=np.zeros(t, bool),
        n_changed=n_changed, n_changed_bound=n_bound, collective_flips=flips, seconds=time.perf_counter() - t0,
    )  # fmt: skip


def _milp_collective(setup, budget, tol, solver, time_limit, formulation, fixed_alpha, method, t0):
    q_ll, q_tl = setup.q_ll.numpy(), setup.q_tl.numpy()
    obj = {"kind": "collective"}
    obj["signs" if setup.n_classes == 2 else "clean"] = setup.clean_dir
    form = build_certificate_milp(q_ll, q_tl, setup.labels_hat, setup.n_classes, setup.c, budget, obj,
                                  formulation=formulation, fixed_alpha=fixed_alpha, tol=tol)  # fmt: skip
    start = mip_start(form, q_ll, setup.labels_hat, setup.alphas, setup.c)
    start[form.count] = 0.0
    form.problem.start = start
    sol = solve(form.problem, solver, time_limit=time_limit, gap_abs=0.99)
    labels = form.labels(sol.x) if sol.x is not None else setup.labels_hat.copy()
    t = len(setup.test_idx)
    bound = t if not np.isfinite(sol.bound) else int(np.floor(-sol.bound + 1e-6))
    return _collective_result(setup, budget, method, labels, min(bound, t), sol.status == "optimal", tol, t0)


def certify_label_flips(
    Q,
    y,
    train_idx,
    test_idx,
    budget=2,
    C: float = 1.0,
    mode: str = "samplewise",
    method: str = "auto",
    solver: str = "highs",
    time_limit: float | None = 60,
    formulation: str = "compact",
    tol: float = CertifyConfig.tol,
    exact_margin: bool = False,
    enum_limit: int = CertifyConfig.enum_limit,
    backend: str = "auto",
) -> CertificateResult:
    """Certify the NTK-SVM trained on ``y[train_idx]`` against at most ``budget`` label flips (see module doc).

    ``exact_margin=True`` makes the MILP solve to optimality (default: stop once the sign is decided, so a
    certified node's margin may be a lower bound — see ``margin_exact``).
    """
    t0 = time.perf_counter()
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: expected one of {MODES}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: expected one of {METHODS}")
    setup = _prepare(Q, y, train_idx, test_idx, C)
    k = resolve_budget(budget, setup.m)
    n_enum = enumeration_size(setup.m, k, setup.n_classes)
    if method == "auto":
        if mode == "samplewise" and setup.sort_regime:
            method = "sort"
        elif n_enum <= (enum_limit if not setup.sort_regime else min(enum_limit, 2000)):
            method = "enumerate"
        else:
            method = "sort" if setup.sort_regime else "milp"
    if method == "sort" and not setup.sort_regime:
        raise ValueError("method='sort' needs C * max_i sum_j |Q_ij| <= 1 over the labelled nodes (all alphas = C)")
    if mode == "samplewise":
        if method == "sort":
            return _sort_samplewise(setup, k, tol, t0)
        if method == "enumerate":
            return _enumerate_samplewise(setup, k, tol, backend, t0)
        return _milp_samplewise(setup, k, tol, solver, time_limit, formulation, exact_margin, t0)
    if method == "enumerate":
        table = enumerate_certificates(setup.q_ll, setup.q_tl, setup.labels_hat, setup.n_classes, setup.c, [k],
                                       setup.clean_dir, tol, backend)  # fmt: skip
        return _collective_result(setup, k, "enumerate", table.best_count_labels[0], table.best_count[0], True, tol, t0)
    return _milp_collective(setup, k, tol, solver, time_limit, formulation, method == "sort", method, t0)


def brute_force_label_flips(Q, y, train_idx, test_idx, budget=2, C: float = 1.0, mode: str = "samplewise",
                            tol: float = CertifyConfig.tol, backend: str = "auto") -> CertificateResult:  # fmt: skip
    """The oracle: retrain the exact SVM on every flip set within the budget (no symmetry tricks, no shortcuts)."""
    return certify_label_flips(Q, y, train_idx, test_idx, budget, C, mode, method="enumerate", tol=tol,
                               enum_limit=10**12, backend=backend)  # fmt: skip


def certify_curve(
    Q,
    y,
    train_idx,
    test_idx,
    budgets,
    C: float = 1.0,
    collective_idx=None,
    tol: float = CertifyConfig.tol,
    solver: str = "highs",
    time_limit: float | None = 30,
    enum_limit: int = CertifyConfig.enum_limit,
    backend: str = "auto",
) -> dict:
    """Sample-wise (on ``test_idx``) and collective (on ``collective_idx``, default ``test_idx``) certified ratios
    for several budgets, sharing one setup: one enumeration for all budgets when it is small enough, else the sort
    path (sample-wise) and its linear MILP (collective) in the all-alpha-equal-C regime, else the KKT MILP."""
    t0 = time.perf_counter()
    setup = _prepare(Q, y, train_idx, test_idx, C)
    coll = setup if collective_idx is None else _prepare(Q, y, train_idx, collective_idx, C)
    ks = [resolve_budget(b, setup.m) for b in budgets]
    out = {"budgets": ks, "samplewise": [], "collective": [], "collective_exact": []}
    if enumeration_size(setup.m, max(ks), setup.n_classes) <= enum_limit:
        out["method"] = "enumerate"
        table = enumerate_certificates(setup.q_ll, setup.q_tl, setup.labels_hat, setup.n_classes, setup.c, ks,
                                       setup.clean_dir, tol, backend)  # fmt: skip
        ctab = (
            table
            if coll is setup
            else enumerate_certificates(
                coll.q_ll, coll.q_tl, coll.labels_hat, coll.n_classes, coll.c, ks, coll.clean_dir, tol, backend
            )
        )
        t = len(coll.test_idx)
        out["samplewise"] = [float(np.mean(table.worst_margin[i] > tol)) for i in range(len(ks))]
        out["collective"] = [float((t - ctab.best_count[i]) / t) for i in range(len(ks))]
        out["collective_exact"] = [True] * len(ks)
    else:
        out["method"] = "sort" if setup.sort_regime else "milp"
        for k in ks:
            if setup.sort_regime:
                sw = _sort_samplewise(setup, k, tol, t0)
            else:
                sw = _milp_samplewise(setup, k, tol, solver, time_limit, "compact", False, t0)
            col = _milp_collective(coll, k, tol, solver, time_limit, "compact", coll.sort_regime, out["method"], t0)
            out["samplewise"].append(sw.certified_ratio)
            out["collective"].append(col.certified_ratio)
            out["collective_exact"].append(col.n_changed == col.n_changed_bound)
    out["seconds"] = time.perf_counter() - t0
    return out
