"""A small solver-agnostic mixed-integer linear program: min c^T x, row_lo <= A x <= row_hi, lb <= x <= ub."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


class MilpProblem:
    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integer: list[bool] = []
        self.cost: list[float] = []
        self._rows: list[tuple[np.ndarray, np.ndarray]] = []
        self.row_lo: list[float] = []
        self.row_hi: list[float] = []
        self.start: np.ndarray | None = None
        self.offset = 0.0

    @property
    def num_vars(self) -> int:
        return len(self.lb)

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def add_vars(self, count: int, lb, ub, integer: bool = False) -> np.ndarray:
        """Add ``count`` variables (bounds broadcast); returns their indices."""
        idx = np.arange(self.num_vars, self.num_vars + count)
        self.lb.extend(np.broadcast_to(np.asarray(lb, dtype=float), (count,)).tolist())
        self.ub.extend(np.broadcast_to(np.asarray(ub, dtype=float), (count,)).tolist())
        self.integer.extend([integer] * count)
        self.cost.extend([0.0] * count)
        return idx

    def add_row(self, idx, coef, lo: float = -np.inf, hi: float = np.inf) -> None:
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        coef = np.asarray(coef, dtype=float).reshape(-1)
        if idx.shape != coef.shape:
            raise ValueError("row indices and coefficients differ in length")
        self._rows.append((idx, coef))
        self.row_lo.append(float(lo))
        self.row_hi.append(float(hi))

    def set_cost(self, idx, coef, offset: float = 0.0) -> None:
        cost = np.zeros(self.num_vars)
        np.add.at(cost, np.asarray(idx, dtype=np.int64), np.asarray(coef, dtype=float))
        self.cost = cost.tolist()
        self.offset = float(offset)

    def matrix(self) -> sp.csr_matrix:
        if not self._rows:
            return sp.csr_matrix((0, self.num_vars))
        data = np.concatenate([c for _, c in self._rows])
        cols = np.concatenate([i for i, _ in self._rows])
        rows = np.repeat(np.arange(self.num_rows), [len(i) for i, _ in self._rows])
        return sp.csr_matrix((data, (rows, cols)), shape=(self.num_rows, self.num_vars))

    def max_violation(self, x: np.ndarray) -> float:
        """Largest bound/row/integrality violation of ``x`` (0 for a feasible point)."""
        x = np.asarray(x, dtype=float)
        ax = self.matrix() @ x
        lo, hi = np.asarray(self.row_lo), np.asarray(self.row_hi)
        viol = [np.max(np.maximum(lo - ax, 0), initial=0), np.max(np.maximum(ax - hi, 0), initial=0)]
        viol += [np.max(np.maximum(np.asarray(self.lb) - x, 0)), np.max(np.maximum(x - np.asarray(self.ub), 0))]
        ints = np.asarray(self.integer)
        if ints.any():
            viol.append(np.max(np.abs(x[ints] - np.round(x[ints]))))
        return float(max(viol))
