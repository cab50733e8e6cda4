"""Data: CSBM and CBA generators (official random-number order), official splits, karate club, citation npz."""

from .graphs import Graph, binary_subset, karate_club, load_citation_npz, save_citation_npz
from .splits import split_csbm, split_inductive
from .synthetic import cba_graph, csbm_graph, make_csbm

__all__ = [
    "Graph",
    "binary_subset",
    "cba_graph",
    "csbm_graph",
    "karate_club",
    "load_citation_npz",
    "make_csbm",
    "save_citation_npz",
    "split_csbm",
    "split_inductive",
]
