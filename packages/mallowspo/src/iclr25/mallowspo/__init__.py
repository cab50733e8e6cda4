"""iclr25.mallowspo: MallowsPO (Chen, Zhao, Lam, Yao, Tang; ICLR 2025), preference optimisation with a per-prompt
dispersion index.

Losses on per-sequence log-probs, the reference-entropy dispersion estimator, exact Mallows pairwise laws and
samplers, a solvable Mallows bandit, a trainer for transformers causal LMs, and a TRL integration
(``iclr25.mallowspo.integrations.trl``, optional extra ``[trl]``).
"""

from .bandit import MallowsBandit, fit_bandit_policy
from .calibration import calibrate_phi_star
from .config import MallowsPOConfig
from .dispersion import neg_log_dispersion, sequence_entropy, token_entropy
from .logps import sequence_logps
from .losses import dpo_loss, mallows_ipo_loss, mallows_phi_loss, mallows_theta_loss
from .mallows import pairwise_prob_phi, pairwise_prob_theta, sample_mallows_phi, sample_mallows_theta
from .trainer import MallowsPOTrainer

__version__ = "0.1.0"

__all__ = [
    "MallowsBandit",
    "MallowsPOConfig",
    "MallowsPOTrainer",
    "calibrate_phi_star",
    "dpo_loss",
    "fit_bandit_policy",
    "mallows_ipo_loss",
    "mallows_phi_loss",
    "mallows_theta_loss",
    "neg_log_dispersion",
    "pairwise_prob_phi",
    "pairwise_prob_theta",
    "sample_mallows_phi",
    "sample_mallows_theta",
    "sequence_entropy",
    "sequence_logps",
    "token_entropy",
]
