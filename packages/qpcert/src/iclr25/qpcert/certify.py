"""Exact label-flipping certificates (the paper's QPCert/LabelCert) for the NTK-SVM of part 1.

Question: can an adversary who changes at most k training labels change the prediction of a test node
(sample-wise), or of how many test nodes at once (collective)? Three exact paths, all forced with ``method=``:

- ``"sort"``: when C max_i sum_j |Q_ij| <= 1 (over the labelled nodes) every dual equals C for every labeling, so
  p_t = C sum_j y_j Q_tj is linear in the labels; the sample-wise certificate is a sort of per-node gains; the
  collective one is a small MILP without the KKT block.
- ``"enumerate"``: retrain the exact SVM on every flip set within the budget (batched; Triton on GPU).
- ``"milp"``: the KKT reformulation (:mod:`iclr25.qpcert.milp`) with HiGHS / SCIP / scipy / Gurobi.

``method="auto"`` picks sort (sample-wise, in its regime), else enumeration when it needs at most ``enum_limit`` QPs,
else the MILP. Tolerance: ``tol`` is *relative* to P_t = C sum_j |Q_tj| (the largest |p_t| any labeling can give, the
big-M of the official collective MILP), so a margin <= tol * P_t counts as *not certified*; scaling C in the
all-alpha-equal-C regime scales every logit and every P_t alike and leaves every certificate unchanged. The MILPs are
solved in these units (alpha / C and p_t / P_t), so solver tolerances are scale-free as well. A solver status other
than optimal / decided, a time-out or an infeasible model gives "unknown", never "certified"; every "not certified"
witness is retrained before it is reported. Tie rule: p >= 0 is class +1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr25.shared import progress

from .config import CertifyConfig
from .enumeration import count_flip_sets, enumerate_certificates, enumeration_size
from .milp import build_certificate_milp, solve
from .milp.formulations import mip_start
from .svm import _check_c, solve_batch, validate_kernel

# brute_force_label_flips refuses to retrain more SVMs than this (about a minute on 2 cores)
BRUTE_FORCE_LIMIT = 200_000

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
    correct: np.ndarray | None = None  # bool per node: the clean prediction equals y[test_idx]
    tolerance: np.ndarray | None = None  # absolute tolerance per node: tol * C * sum_j |Q_tj|
    n_changed_correct_bound: int | None = None  # collective: proven bound on correctly classified nodes changed

    @property
    def certified_ratio(self) -> float:
        if not len(self.status):
            return float("nan")
        if self.mode == "collective":
            return (len(self.status) - self.n_changed_bound) / len(self.status)
        return float(np.mean([s == "certified" for s in self.status]))

    @property
    def clean_accuracy(self) -> float:
        return float(np.mean(self.correct)) if self.correct is not None and len(self.correct) else float("nan")

    @property
    def certified_accuracy(self) -> float:
        """Fraction of test nodes that are correctly classified AND certified. Collective: correct nodes that no
        single shared attack within the budget changes; exact from enumeration, a proven lower bound from the MILP
        (which maximises the number of changed nodes, not of changed correct ones)."""
        if self.correct is None or not len(self.status):
            return float("nan")
        if self.mode == "collective":
            return (int(self.correct.sum()) - self.n_changed_correct_bound) / len(self.status)
        return float(np.mean([s == "certified" and ok for s, ok in zip(self.status, self.correct)]))


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
    scale: np.ndarray  # [t] P_t = C sum_j |Q_tj|: no labeling gives |p_t| > P_t
    tol: float  # relative tolerance
    correct: np.ndarray  # [t] clean prediction == true label

    @property
    def m(self) -> int:
        return self.q_ll.shape[0]

    @property
    def sort_regime(self) -> bool:
        return self.c * float(self.q_ll.abs().sum(1).max()) <= 1.0

    @property
    def tol_abs(self) -> np.ndarray:
        return self.tol * self.scale


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


def check_tol(tol) -> float:
    """The relative tolerance: a finite number >= 0."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) or not np.isfinite(tol):
        raise ValueError(f"tol must be a finite number >= 0 (relative to C sum_j |Q_tj|), got {tol!r}")
    if tol < 0:
        raise ValueError(f"tol must be >= 0 (a negative tolerance would certify negative margins), got {tol!r}")
    return float(tol)


def _node_ids(idx, name: str, n: int) -> np.ndarray:
    """Validated integer node ids (no boolean masks, no floats, no duplicates, in range, not empty)."""
    if isinstance(idx, torch.Tensor):
        idx = idx.detach().cpu().numpy()
    a = np.asarray(idx)
    if a.dtype == bool:
        raise TypeError(f"{name} is a boolean mask; pass node ids instead, e.g. np.flatnonzero(mask)")
    if a.size == 0:
        raise ValueError(f"{name} is empty: at least one node id is needed")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer node ids, got dtype {a.dtype} (e.g. {a.reshape(-1)[0]!r})")
    a = a.astype(np.int64).reshape(-1)
    if a.min() < 0 or a.max() >= n:
        raise ValueError(f"{name} has node ids outside [0, {n}): min {a.min()}, max {a.max()}")
    if len(np.unique(a)) != len(a):
        raise ValueError(f"{name} contains duplicate node ids")
    return a


def _prepare(Q, y, train_idx, test_idx, C, tol: float = CertifyConfig.tol) -> _Setup:
    c = _check_c(C)
    tol = check_tol(tol)
    q = torch.as_tensor(np.asarray(Q) if not isinstance(Q, torch.Tensor) else Q).detach().to(torch.float64)
    if q.ndim != 2 or q.shape[0] != q.shape[1] or q.shape[0] == 0:
        raise ValueError(f"Q must be the full non-empty [n, n] kernel, got shape {tuple(q.shape)}")
    n = q.shape[0]
    train_idx = _node_ids(train_idx, "train_idx", n)
    test_idx = _node_ids(test_idx, "test_idx", n)
    overlap = np.intersect1d(train_idx, test_idx)
    if overlap.size:
        raise ValueError(f"train_idx and test_idx overlap in {overlap.size} nodes (e.g. {overlap[:5].tolist()})")
    y = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y).reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"y must hold the labels of all {n} nodes, got {y.shape[0]}")
    if y.dtype.kind in "fc":
        bad = [i for i in np.concatenate([train_idx, test_idx]) if not np.isfinite(y[i])]
        if bad:
            raise ValueError(f"y has NaN/inf labels at {len(bad)} train/test nodes (e.g. node {bad[0]})")
    # the QP needs a positive semi-definite labelled block only; Q_TL just has to be finite
    q_ll = validate_kernel(q[np.ix_(train_idx, train_idx)], "Q restricted to the labelled nodes (Q_LL)").contiguous()
    q_tl = q[np.ix_(test_idx, train_idx)].contiguous()
    if not torch.isfinite(q_tl).all():
        raise ValueError("Q has NaN or inf entries between test and labelled nodes")
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
        predicted = np.where(clean_dir > 0, classes[1], classes[0])
    else:
        clean_scores = scores.T
        clean_dir = clean_scores.argmax(axis=1)
        setup_tmp = clean_scores[None]
        t = np.arange(len(clean_dir))
        other = setup_tmp.copy()
        other[:, t, clean_dir] = -np.inf
        clean_margin = (setup_tmp[:, t, clean_dir] - other.max(axis=2))[0]
        predicted = classes[clean_dir]
    correct = np.asarray(predicted == y[test_idx], dtype=bool)
    scale = c * q_tl.abs().sum(1).numpy()
    return _Setup(q_ll, q_tl, train_idx, test_idx, labels_hat, classes, n_classes, c, alphas, clean_scores,
                  clean_dir, clean_margin, scale, tol, correct)  # fmt: skip


def resolve_budget(budget, m: int, budget_fraction=None) -> int:
    """The number of flips k: ``budget`` is an int count; a fraction delta of the m labelled nodes must be passed as
    ``budget_fraction`` (k = int(delta m), the official rule). A float ``budget`` is refused: ``budget=1`` (one flip)
    and ``budget=1.0`` (every label) must not be confused."""
    if budget_fraction is not None:
        if budget is not None:
            raise ValueError("pass either budget (an int count of flips) or budget_fraction, not both")
        f = budget_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or not np.isfinite(f):
            raise TypeError(f"budget_fraction must be a number in [0, 1], got {f!r}")
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"budget_fraction must lie in [0, 1], got {f}")
        return int(f * m)
    if budget is None:
        raise ValueError(
            "give budget (an int count of label flips) or budget_fraction (a fraction of the labelled nodes)"
        )
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise TypeError(
            f"budget must be an int count of label flips, got {budget!r} ({type(budget).__name__}); "
            "for a fraction of the labelled nodes pass budget_fraction="
        )
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


def _clean_prediction(setup: _Setup) -> np.ndarray:
    if setup.n_classes == 2:
        return _user_labels(setup, setup.clean_dir)
    return setup.classes[setup.clean_dir]


def _finish_samplewise(setup, budget, method, margins, exact, witnesses, unknown, t0) -> CertificateResult:
    """Verify every witness by retraining, then set statuses (margin <= tol P_t: not certified)."""
    t = len(setup.test_idx)
    tol = setup.tol_abs
    status, flips, flipped = ["certified"] * t, [None] * t, [None] * t
    margins = np.asarray(margins, dtype=float).copy()
    exact = np.asarray(exact, dtype=bool).copy()
    rows = [r for r in range(t) if witnesses[r] is not None]
    if rows:
        verified = _margin_of(setup, _scores(setup, np.stack([witnesses[r] for r in rows])))
        for i, r in enumerate(rows):
            actual = verified[i, r]
            if actual <= tol[r]:
                status[r] = "not_certified"
                flips[r] = _labels_to_flips(setup, witnesses[r])
                flipped[r] = _user_labels(setup, witnesses[r])[np.asarray(witnesses[r]) != setup.labels_hat]
                margins[r] = actual if exact[r] else min(margins[r], actual)
            else:
                status[r] = "unknown"
                exact[r] = False
    for r in range(t):
        if unknown[r] and status[r] != "not_certified":
            status[r] = "unknown"
        elif witnesses[r] is None and not unknown[r] and not margins[r] > tol[r]:
            status[r] = "unknown"  # no verified witness for a margin within the tolerance: never claim either way
    return CertificateResult(
        mode="samplewise", method=method, budget=budget, test_idx=setup.test_idx, status=status, margin=margins,
        flips=flips, clean_prediction=_clean_prediction(setup), clean_margin=setup.clean_margin, margin_exact=exact,
        flipped_labels=flipped, seconds=time.perf_counter() - t0, correct=setup.correct, tolerance=tol,
    )  # fmt: skip


def _sort_samplewise(setup: _Setup, budget: int, t0: float) -> CertificateResult:
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
        witnesses[r] = lab if margins[r] <= setup.tol_abs[r] else None
    return _finish_samplewise(setup, budget, "sort", margins, np.ones(t, bool), witnesses, [False] * t, t0)


def _enumerate(setup: _Setup, budgets: list[int], backend: str):
    return enumerate_certificates(setup.q_ll, setup.q_tl, setup.labels_hat, setup.n_classes, setup.c, budgets,
                                  setup.clean_dir, setup.tol_abs, backend, correct=setup.correct)  # fmt: skip


def _enumerate_samplewise(setup, budget, backend, t0) -> CertificateResult:
    table = _enumerate(setup, [budget], backend)
    margins = table.worst_margin[0]
    tol = setup.tol_abs
    witnesses = [table.worst_labels[0, r] if margins[r] <= tol[r] else None for r in range(len(margins))]
    t = len(margins)
    return _finish_samplewise(setup, budget, "enumerate", margins, np.ones(t, bool), witnesses, [False] * t, t0)


def _scaled_milp_inputs(setup: _Setup):
    """The MILP in scale-free units: alpha / C in [0, 1] (so Q_LL -> C Q_LL, C -> 1) and logits p_t / P_t in
    [-1, 1] (rows of Q_TL divided by sum_j |Q_tj|); the relative tolerance then applies directly."""
    q_ll = setup.c * setup.q_ll.numpy()
    q_tl = setup.q_tl.numpy()
    row = np.abs(q_tl).sum(axis=1)
    q_tl = q_tl / np.where(row > 0, row, 1.0)[:, None]
    return q_ll, q_tl, setup.alphas / setup.c


DECIDED = ("optimal", "stopped")  # the only solver statuses a certificate may rest on


def _milp_samplewise(setup, budget, solver, time_limit, formulation, exact_margin, t0) -> CertificateResult:
    q_ll, q_tl, alphas = _scaled_milp_inputs(setup)
    t, tol = q_tl.shape[0], setup.tol
    margins, exact, witnesses, unknown = np.zeros(t), np.zeros(t, bool), [None] * t, [False] * t
    for r in progress(range(t), desc="MILP certificates", leave=False):
        if setup.n_classes == 2:
            objectives = [{"kind": "margin", "row": r, "sign": setup.clean_dir[r]}]
        else:
            cc = int(setup.clean_dir[r])
            objectives = [{"kind": "margin", "row": r, "clean": cc, "target": k} for k in range(setup.n_classes)
                          if k != cc]  # fmt: skip
        best_val, best_lab, proven, all_exact, unk = np.inf, None, [], True, False
        for i, obj in enumerate(objectives):
            form = build_certificate_milp(q_ll, q_tl, setup.labels_hat, setup.n_classes, 1.0, budget, obj,
                                          formulation=formulation, tol=tol)  # fmt: skip
            form.problem.start = mip_start(form, q_ll, setup.labels_hat, alphas, 1.0)
            stop = None if exact_margin else tol
            sol = solve(form.problem, solver, time_limit=time_limit, stop_below=stop, stop_above=stop)
            usable_x = sol.status in (*DECIDED, "time_limit") and sol.x is not None
            if usable_x and sol.objective <= tol:  # a candidate attack (verified by retraining later)
                if sol.objective < best_val:
                    best_val, best_lab = sol.objective, form.labels(sol.x)
                all_exact &= sol.status == "optimal"
                if not exact_margin:
                    all_exact &= i == len(objectives) - 1  # the other classes were not searched
                    break
            elif sol.status == "optimal" and sol.x is not None and sol.objective > tol:
                proven.append(sol.objective)  # the exact optimum, above the tolerance
            elif sol.status == "stopped" and sol.bound > tol:
                proven.append(sol.bound)  # dual bound above the tolerance: decided, no attack
                all_exact = False
            else:  # time-out, infeasible, error, or an undecided stop: nothing can be claimed
                unk, all_exact = True, False
                proven.append(sol.bound if np.isfinite(sol.bound) else -np.inf)
        margins[r] = min([best_val, *proven]) * setup.scale[r]
        witnesses[r] = best_lab
        exact[r] = all_exact and not unk
        unknown[r] = unk
    return _finish_samplewise(setup, budget, "milp", margins, exact, witnesses, unknown, t0)


def _collective_result(setup, budget, method, labels, n_bound, exact, t0, n_correct_bound=None) -> CertificateResult:
    t = len(setup.test_idx)
    margins = _margin_of(setup, _scores(setup, labels[None]))[0]
    changed = margins <= setup.tol_abs
    n_changed = int(changed.sum())
    n_bound = max(int(n_bound), n_changed)
    exact = exact and n_bound == n_changed
    n_correct = int(setup.correct.sum())
    if n_correct_bound is None:  # any shared attack changes at most n_bound nodes, hence at most that many correct ones
        n_correct_bound = min(n_bound, n_correct)
    n_correct_bound = max(int(n_correct_bound), int((changed & setup.correct).sum()))
    status = ["not_certified" if ch else ("certified" if exact else "unknown") for ch in changed]
    flips = _labels_to_flips(setup, labels)
    return CertificateResult(
        mode="collective", method=method, budget=budget, test_idx=setup.test_idx, status=status, margin=margins,
        flips=[flips if ch else None for ch in changed], clean_prediction=_clean_prediction(setup),
        clean_margin=setup.clean_margin, margin_exact=np.zeros(t, bool), n_changed=n_changed,
        n_changed_bound=n_bound, collective_flips=flips, seconds=time.perf_counter() - t0, correct=setup.correct,
        tolerance=setup.tol_abs, n_changed_correct_bound=min(n_correct_bound, n_correct),
    )  # fmt: skip


def _milp_collective(setup, budget, solver, time_limit, formulation, fixed_alpha, method, t0):
    q_ll, q_tl, alphas = _scaled_milp_inputs(setup)
    obj = {"kind": "collective"}
    obj["signs" if setup.n_classes == 2 else "clean"] = setup.clean_dir
    form = build_certificate_milp(q_ll, q_tl, setup.labels_hat, setup.n_classes, 1.0, budget, obj,
                                  formulation=formulation, fixed_alpha=fixed_alpha, tol=setup.tol)  # fmt: skip
    start = mip_start(form, q_ll, setup.labels_hat, alphas, 1.0)
    start[form.count] = 0.0
    form.problem.start = start
    sol = solve(form.problem, solver, time_limit=time_limit, gap_abs=0.99)
    t = len(setup.test_idx)
    # a dual bound is used only from a solve that ended normally (optimal, or a time-out, whose bound stays valid);
    # infeasible / error statuses prove nothing: bound = t (ratio 0) and the clean labels as the attack
    ok = sol.status in (*DECIDED, "time_limit")
    labels = form.labels(sol.x) if ok and sol.x is not None else setup.labels_hat.copy()
    bound = int(np.floor(-sol.bound + 1e-6)) if ok and np.isfinite(sol.bound) else t
    return _collective_result(setup, budget, method, labels, min(max(bound, 0), t), sol.status == "optimal", t0)


def _tighten_collective(col: CertificateResult, sw: CertificateResult) -> CertificateResult:
    """A node certified sample-wise cannot be changed by any attack within the budget, shared ones included: such
    nodes are certified collectively too, which tightens a time-limited collective bound (never loosens it)."""
    sw_cert = {int(i) for i, s in zip(sw.test_idx, sw.status) if s == "certified"}
    safe = np.array([int(i) in sw_cert for i in col.test_idx])
    if not safe.any():
        return col
    changed = np.array([s == "not_certified" for s in col.status])
    if (safe & changed).any():  # cannot happen for sound certificates; keep the verified attack's word
        return col
    col.n_changed_bound = min(col.n_changed_bound, int((~safe).sum()))
    col.n_changed_correct_bound = min(col.n_changed_correct_bound, int((~safe & col.correct).sum()))
    col.status = ["certified" if ok else st for ok, st in zip(safe, col.status)]
    if col.n_changed_bound == col.n_changed:
        col.status = [st if st == "not_certified" else "certified" for st in col.status]
    return col


def certify_label_flips(
    Q,
    y,
    train_idx,
    test_idx,
    budget: int | None = None,
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
    budget_fraction: float | None = None,
) -> CertificateResult:
    """Certify the NTK-SVM trained on ``y[train_idx]`` against at most ``budget`` label flips (see module doc).

    ``budget``: an int count of flips; or ``budget_fraction=delta`` for k = int(delta m) (official rule).
    ``tol``: relative tolerance (>= 0): a worst-case margin <= tol * C sum_j |Q_tj| is not certified.
    ``exact_margin=True`` makes the MILP solve to optimality (default: stop once the sign is decided, so a
    certified node's margin may be a lower bound — see ``margin_exact``).
    """
    t0 = time.perf_counter()
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: expected one of {MODES}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: expected one of {METHODS}")
    setup = _prepare(Q, y, train_idx, test_idx, C, tol)
    k = resolve_budget(budget, setup.m, budget_fraction)
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
            return _sort_samplewise(setup, k, t0)
        if method == "enumerate":
            return _enumerate_samplewise(setup, k, backend, t0)
        return _milp_samplewise(setup, k, solver, time_limit, formulation, exact_margin, t0)
    if method == "enumerate":
        table = _enumerate(setup, [k], backend)
        return _collective_result(setup, k, "enumerate", table.best_count_labels[0], table.best_count[0], True, t0,
                                  table.best_count_correct[0])  # fmt: skip
    return _milp_collective(setup, k, solver, time_limit, formulation, method == "sort", method, t0)


def brute_force_label_flips(
    Q,
    y,
    train_idx,
    test_idx,
    budget: int | None = None,
    C: float = 1.0,
    mode: str = "samplewise",
    tol: float = CertifyConfig.tol,
    backend: str = "auto",
    budget_fraction: float | None = None,
    max_qps: int = BRUTE_FORCE_LIMIT,
) -> CertificateResult:
    """The oracle: retrain the exact SVM on every flip set within the budget (no shortcuts). Refuses (ValueError)
    a problem that needs more than ``max_qps`` SVM solves instead of running for hours."""
    setup = _prepare(Q, y, train_idx, test_idx, C, tol)
    k = resolve_budget(budget, setup.m, budget_fraction)
    need = min(count_flip_sets(setup.m, k, setup.n_classes), enumeration_size(setup.m, k, setup.n_classes))
    if need > max_qps:
        raise ValueError(
            f"brute force would retrain {need:,} SVMs (m = {setup.m}, budget {k}), more than max_qps = {max_qps:,}; "
            "lower the budget, use certify_label_flips (MILP), or raise max_qps"
        )
    return certify_label_flips(Q, y, train_idx, test_idx, k, C, mode, method="enumerate", tol=tol,
                               enum_limit=10**12, backend=backend)  # fmt: skip


def certify_curve(
    Q,
    y,
    train_idx,
    test_idx,
    budgets=None,
    C: float = 1.0,
    collective_idx=None,
    tol: float = CertifyConfig.tol,
    solver: str = "highs",
    time_limit: float | None = 30,
    enum_limit: int = CertifyConfig.enum_limit,
    backend: str = "auto",
    budget_fractions=None,
) -> dict:
    """Sample-wise (on ``test_idx``) and collective (on ``collective_idx``, default ``test_idx``) certified ratios
    and certified accuracies (correct AND certified) for several budgets (int counts, or ``budget_fractions``),
    sharing one setup: one enumeration for all budgets when it is small enough, else the sort path (sample-wise) and
    its linear MILP (collective) in the all-alpha-equal-C regime, else the KKT MILP."""
    t0 = time.perf_counter()
    setup = _prepare(Q, y, train_idx, test_idx, C, tol)
    coll = setup if collective_idx is None else _prepare(Q, y, train_idx, collective_idx, C, tol)
    if (budgets is None) == (budget_fractions is None):
        raise ValueError("pass exactly one of budgets (int counts) or budget_fractions")
    if budgets is not None:
        ks = [resolve_budget(b, setup.m) for b in budgets]
    else:
        ks = [resolve_budget(None, setup.m, f) for f in budget_fractions]
    out = {"budgets": ks, "samplewise": [], "collective": [], "collective_exact": [], "samplewise_accuracy": [],
           "collective_accuracy": [], "clean_accuracy": float(np.mean(setup.correct)),
           "collective_clean_accuracy": float(np.mean(coll.correct))}  # fmt: skip
    if enumeration_size(setup.m, max(ks), setup.n_classes) <= enum_limit:
        out["method"] = "enumerate"
        table = _enumerate(setup, ks, backend)
        ctab = table if coll is setup else _enumerate(coll, ks, backend)
        t = len(coll.test_idx)
        for i in range(len(ks)):
            cert = table.worst_margin[i] > setup.tol_abs
            out["samplewise"].append(float(np.mean(cert)))
            out["samplewise_accuracy"].append(float(np.mean(cert & setup.correct)))
            out["collective"].append(float((t - ctab.best_count[i]) / t))
            out["collective_accuracy"].append(float((coll.correct.sum() - ctab.best_count_correct[i]) / t))
            out["collective_exact"].append(True)
    else:
        out["method"] = "sort" if setup.sort_regime else "milp"
        for k in ks:
            if setup.sort_regime:
                sw = _sort_samplewise(setup, k, t0)
            else:
                sw = _milp_samplewise(setup, k, solver, time_limit, "compact", False, t0)
            col = _milp_collective(coll, k, solver, time_limit, "compact", coll.sort_regime, out["method"], t0)
            col = _tighten_collective(col, sw)
            out["samplewise"].append(sw.certified_ratio)
            out["samplewise_accuracy"].append(sw.certified_accuracy)
            out["collective"].append(col.certified_ratio)
            out["collective_accuracy"].append(col.certified_accuracy)
            out["collective_exact"].append(col.n_changed == col.n_changed_bound)
    out["seconds"] = time.perf_counter() - t0
    return out
