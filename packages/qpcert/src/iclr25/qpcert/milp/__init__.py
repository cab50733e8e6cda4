"""Solver-agnostic MILP layer: a problem container, the label-flip formulations and the solver backends."""

from .backends import SOLVERS, MilpSolution, available_solvers, solve
from .formulations import KKTFormulation, build_certificate_milp
from .problem import MilpProblem

__all__ = [
    "SOLVERS",
    "KKTFormulation",
    "MilpProblem",
    "MilpSolution",
    "available_solvers",
    "build_certificate_milp",
    "solve",
]
