"""iclr25.mixmax: MixMax, group DRO in function space via optimal data mixtures (Thudi & Maddison, ICLR 2025)."""

from .baselines import GroupDROLoss
from .density import ClassifierDensityRatio, GaussianKDE, GroupKDE
from .estimators import (
    MixMax,
    SeparableGroupsWarning,
    balanced_sample_weight,
    erm_sample_weight,
    group_sample_weight,
)
from .objective import RiskCache, mixture_log_posterior
from .solvers import DiscreteSolution, MirrorAscentResult, group_dro_discrete, mirror_ascent, solve_discrete

__version__ = "0.1.0"

__all__ = [
    "solve_discrete",
    "MixMax",
    "SeparableGroupsWarning",
    "GaussianKDE",
    "balanced_sample_weight",
    "GroupDROLoss",
    "erm_sample_weight",
    "group_sample_weight",
    "GroupKDE",
    "ClassifierDensityRatio",
    "mirror_ascent",
    "group_dro_discrete",
    "DiscreteSolution",
    "MirrorAscentResult",
    "RiskCache",
    "mixture_log_posterior",
    "__version__",
]
