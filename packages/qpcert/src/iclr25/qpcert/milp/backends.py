"""MILP backends: HiGHS (highspy; MIP start, early stop once the certificate's sign is decided, time limit), SCIP
(pyscipopt), ``scipy.optimize.milp`` (HiGHS without start or early stop) and Gurobi (gurobipy, when installed).

All minimise. ``stop_below``: stop as soon as a feasible point with objective <= it is found (an attack);
``stop_above``: stop as soon as the dual bound exceeds it (no attack exists). ``gap_abs``: absolute optimality gap.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass

import numpy as np

from .problem import MilpProblem

SOLVERS = ("highs", "scip", "scipy", "gurobi")


@dataclass
class MilpSolution:
    status: str  # "optimal" | "stopped" (decided early) | "time_limit" | "infeasible" | "error"
    x: np.ndarray | None  # best feasible point (None if none)
    objective: float  # primal objective of x (inf if none)
    bound: float  # dual bound (-inf if unknown)
    seconds: float


def available_solvers() -> list[str]:
    names = {"highs": "highspy", "scip": "pyscipopt", "scipy": "scipy", "gurobi": "gurobipy"}
    return [s for s in SOLVERS if importlib.util.find_spec(names[s]) is not None]


def solve(
    problem: MilpProblem,
    solver: str = "highs",
    time_limit: float | None = None,
    stop_below: float | None = None,
    stop_above: float | None = None,
    gap_abs: float = 0.0,
    threads: int = 1,
) -> MilpSolution:
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}: expected one of {SOLVERS}")
    if solver not in available_solvers():
        raise ValueError(
            f"solver {solver!r} is not installed (pip install {'pyscipopt' if solver == 'scip' else solver})"
        )
    fn = {"highs": _solve_highs, "scip": _solve_scip, "scipy": _solve_scipy, "gurobi": _solve_gurobi}[solver]
    t0 = time.perf_counter()
    sol = fn(problem, time_limit, stop_below, stop_above, gap_abs, threads)
    sol.seconds = time.perf_counter() - t0
    return sol


def _solve_highs(problem, time_limit, stop_below, stop_above, gap_abs, threads) -> MilpSolution:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", int(threads))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", float(gap_abs))
    h.setOptionValue("random_seed", 0)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    inf = highspy.kHighsInf
    a = problem.matrix().tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = problem.num_vars, problem.num_rows
    lp.col_cost_ = np.asarray(problem.cost, dtype=float)
    lp.offset_ = problem.offset
    lp.col_lower_ = np.clip(np.asarray(problem.lb, dtype=float), -inf, inf)
    lp.col_upper_ = np.clip(np.asarray(problem.ub, dtype=float), -inf, inf)
    lp.row_lower_ = np.clip(np.asarray(problem.row_lo, dtype=float), -inf, inf)
    lp.row_upper_ = np.clip(np.asarray(problem.row_hi, dtype=float), -inf, inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(float)
    lp.integrality_ = [
        highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in problem.integer
    ]
    h.passModel(lp)
    if problem.start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(problem.start, dtype=float).tolist()
        sol.value_valid = True
        h.setSolution(sol)
    decided = {"early": False}
    if stop_below is not None or stop_above is not None:

        def callback(_type, _msg, data_out, data_in, _user):
            if stop_below is not None and data_out.mip_primal_bound <= stop_below:
                decided["early"] = True
                data_in.user_interrupt = True
            if stop_above is not None and data_out.mip_dual_bound > stop_above:
                decided["early"] = True
                data_in.user_interrupt = True

        h.setCallback(callback, None)
        h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    ms = highspy.HighsModelStatus
    has_x = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.asarray(h.getSolution().col_value, dtype=float) if has_x else None
    obj = float(info.objective_function_value) if has_x else np.inf
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else -np.inf
    if status == ms.kOptimal:
        return MilpSolution("optimal", x, obj, max(bound, obj) if gap_abs == 0 else bound, 0.0)
    if status == ms.kInfeasible:
        return MilpSolution("infeasible", None, np.inf, np.inf, 0.0)
    if status == ms.kInterrupt and decided["early"]:
        return MilpSolution("stopped", x, obj, bound, 0.0)
    if status == ms.kTimeLimit:
        return MilpSolution("time_limit", x, obj, bound, 0.0)
    return MilpSolution("error", x, obj, bound, 0.0)


def _solve_scip(problem, time_limit, stop_below, stop_above, gap_abs, threads) -> MilpSolution:
    from pyscipopt import Model, quicksum

    m = Model()
    m.hideOutput()
    m.setParam("randomization/randomseedshift", 0)
    if time_limit is not None:
        m.setParam("limits/time", float(time_limit))
    m.setParam("limits/gap", 0.0)
    m.setParam("limits/absgap", float(gap_abs))
    lb, ub = np.asarray(problem.lb), np.asarray(problem.ub)
    xs = [
        m.addVar(
            vtype="I" if problem.integer[i] else "C",
            lb=None if not np.isfinite(lb[i]) else float(lb[i]),
            ub=None if not np.isfinite(ub[i]) else float(ub[i]),
            obj=float(problem.cost[i]),
        )
        for i in range(problem.num_vars)
    ]
    a = problem.matrix()
    for r in range(problem.num_rows):
        lo, hi = problem.row_lo[r], problem.row_hi[r]
        sl = slice(a.indptr[r], a.indptr[r + 1])
        expr = quicksum(float(v) * xs[j] for j, v in zip(a.indices[sl], a.data[sl]))
        if np.isfinite(lo) and np.isfinite(hi):
            m.addCons((lo <= expr) <= hi) if lo != hi else m.addCons(expr == lo)
        elif np.isfinite(lo):
            m.addCons(expr >= lo)
        elif np.isfinite(hi):
            m.addCons(expr <= hi)
    m.addObjoffset(problem.offset)
    if problem.start is not None:
        s = m.createSol()
        for v, val in zip(xs, problem.start):
            m.setSolVal(s, v, float(val))
        m.addSol(s, free=True)
    if stop_below is not None:
        m.setParam("limits/primal", float(stop_below))
    if stop_above is not None:
        m.setParam("limits/dual", float(stop_above))
    m.optimize()
    status = m.getStatus()
    nsol = m.getNSols()
    x = np.array([m.getVal(v) for v in xs]) if nsol > 0 else None
    obj = float(m.getObjVal()) if nsol > 0 else np.inf
    bound = float(m.getDualbound())
    if status == "optimal":
        return MilpSolution("optimal", x, obj, max(bound, obj) if gap_abs == 0 else bound, 0.0)
    if status == "infeasible":
        return MilpSolution("infeasible", None, np.inf, np.inf, 0.0)
    if status in ("primallimit", "duallimit"):
        return MilpSolution("stopped", x, obj, bound, 0.0)
    if status == "timelimit":
        return MilpSolution("time_limit", x, obj, bound, 0.0)
    if status == "gaplimit":
        return MilpSolution("optimal", x, obj, bound, 0.0)
    return MilpSolution("error", x, obj, bound, 0.0)


def _solve_scipy(problem, time_limit, stop_below, stop_above, gap_abs, threads) -> MilpSolution:
    from scipy.optimize import Bounds, LinearConstraint, milp

    options = {"mip_rel_gap": 0.0, "disp": False}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    cons = [LinearConstraint(problem.matrix(), np.asarray(problem.row_lo), np.asarray(problem.row_hi))]
    res = milp(
        c=np.asarray(problem.cost),
        constraints=cons,
        integrality=np.asarray(problem.integer, dtype=int),
        bounds=Bounds(np.asarray(problem.lb), np.asarray(problem.ub)),
        options=options,
    )
    x = res.x if res.x is not None else None
    obj = float(res.fun) + problem.offset if x is not None else np.inf
    bound = getattr(res, "mip_dual_bound", None)
    bound = float(bound) + problem.offset if bound is not None and np.isfinite(bound) else -np.inf
    if res.status == 0:
        return MilpSolution("optimal", x, obj, max(bound, obj), 0.0)
    if res.status == 2:
        return MilpSolution("infeasible", None, np.inf, np.inf, 0.0)
    if res.status == 1:
        return MilpSolution("time_limit", x, obj, bound, 0.0)
    return MilpSolution("error", x, obj, bound, 0.0)


def _solve_gurobi(problem, time_limit, stop_below, stop_above, gap_abs, threads) -> MilpSolution:  # pragma: no cover
    import gurobipy as gp

    m = gp.Model()
    m.Params.OutputFlag = 0
    m.Params.Threads = int(threads)
    m.Params.MIPGap = 0.0
    m.Params.MIPGapAbs = float(gap_abs)
    m.Params.IntegralityFocus = 1
    if time_limit is not None:
        m.Params.TimeLimit = float(time_limit)
    if stop_below is not None:
        m.Params.BestObjStop = float(stop_below)
    if stop_above is not None:
        m.Params.BestBdStop = float(stop_above)
    vtype = np.where(np.asarray(problem.integer), gp.GRB.INTEGER, gp.GRB.CONTINUOUS)
    x = m.addMVar(problem.num_vars, lb=np.asarray(problem.lb), ub=np.asarray(problem.ub), vtype=vtype)
    a = problem.matrix()
    lo, hi = np.asarray(problem.row_lo), np.asarray(problem.row_hi)
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    if fin_lo.any():
        m.addConstr(a[fin_lo] @ x >= lo[fin_lo])
    if fin_hi.any():
        m.addConstr(a[fin_hi] @ x <= hi[fin_hi])
    m.setObjective(np.asarray(problem.cost) @ x + problem.offset, gp.GRB.MINIMIZE)
    if problem.start is not None:
        x.Start = np.asarray(problem.start)
    m.optimize()
    has_x = m.SolCount > 0
    xv = np.asarray(x.X) if has_x else None
    obj = float(m.ObjVal) if has_x else np.inf
    bound = float(m.ObjBound) if m.Status != gp.GRB.INFEASIBLE else np.inf
    if m.Status == gp.GRB.OPTIMAL:
        return MilpSolution("optimal", xv, obj, bound, 0.0)
    if m.Status == gp.GRB.INFEASIBLE:
        return MilpSolution("infeasible", None, np.inf, np.inf, 0.0)
    if m.Status == gp.GRB.USER_OBJ_LIMIT:
        return MilpSolution("stopped", xv, obj, bound, 0.0)
    if m.Status == gp.GRB.TIME_LIMIT:
        return MilpSolution("time_limit", xv, obj, bound, 0.0)
    return MilpSolution("error", xv, obj, bound, 0.0)
