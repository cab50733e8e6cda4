"""Configuration dataclasses. Every default is the paper's / official code's value; the comment names the source.

Sources: Sabanayagam, Gosch, Günnemann, Ghoshdastidar, "Exact Certification of (Graph) Neural Networks Against Label
Poisoning", ICLR 2025 (arXiv 2412.00537), and the official repository ``saper0/qpcert`` (read, not copied).
"""

from __future__ import annotations

from dataclasses import dataclass

ARCHITECTURES = ("mlp", "gcn", "sgc", "appnp", "gin", "sage")
ACTIVATIONS = ("relu", "linear")
SKIPS = (None, "pc", "alpha")
NORMALIZATIONS = ("row", "sym")


@dataclass(frozen=True)
class ArchSpec:
    """One infinite-width architecture whose NTK :func:`iclr25.qpcert.ntk.ntk_matrix` computes."""

    arch: str = "gcn"
    depth: int = 1  # official ``model_dict['depth']``: 1 hidden layer = the 2-layer GCN of the paper
    activation: str = "relu"  # official default activation; SGC forces "linear"
    normalization: str = "row"  # official GCN diffusion: row normalisation D^-1(A+I)
    skip: str | None = None  # official ``skip_connection``: None | "pc" (skip_pc_linear) | "alpha" (skip_alpha_linear)
    skip_alpha: float = 0.2  # official default skip_alpha when not given in the config
    appnp_alpha: float = 0.1  # APPNP teleport probability (Gasteiger et al. 2019 default, used by the official configs)
    appnp_iterations: int = 10  # official APPNP power-iteration count
    appnp_exact: bool = False  # True = PPNP (exact inverse)
    official_compat: bool = False  # True = reproduce the official in-place covariance clamp (see ntk.py)

    def __post_init__(self) -> None:
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {self.arch!r}: expected one of {ARCHITECTURES}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}: expected one of {ACTIVATIONS}")
        if self.skip not in SKIPS:
            raise ValueError(f"unknown skip {self.skip!r}: expected one of {SKIPS}")
        if self.skip is not None and self.arch not in ("gcn", "sgc", "sage"):
            raise ValueError(f"skip connections are defined for gcn/sgc/sage, not {self.arch!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {self.normalization!r}: expected one of {NORMALIZATIONS}")
        if not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"depth must be an integer >= 1, got {self.depth!r}")
        if not 0.0 <= self.skip_alpha <= 1.0:
            raise ValueError(f"skip_alpha must lie in [0, 1], got {self.skip_alpha}")
        if isinstance(self.appnp_iterations, bool) or not isinstance(self.appnp_iterations, int):
            raise ValueError(f"appnp_iterations must be an integer >= 0, got {self.appnp_iterations!r}")
        if self.appnp_iterations < 0:
            raise ValueError(f"appnp_iterations must be >= 0 (power-iteration steps), got {self.appnp_iterations}")
        if not 0.0 < self.appnp_alpha <= 1.0:
            raise ValueError(f"appnp_alpha must lie in (0, 1], got {self.appnp_alpha}")


@dataclass(frozen=True)
class CSBMConfig:
    """Contextual stochastic block model, official label-certification setting."""

    n: int = 200  # official CSBM configs: n = 200 nodes
    avg_within_class_degree: float = 3.16  # official: 3.16 (p = 2*3.16/(n-1))
    avg_between_class_degree: float = 0.74  # official: 0.74 (q = 2*0.74/(n-1))
    K: float = 1.5  # official: mean separation K = 1.5 sigma
    sigma: float = 1.0  # official: sigma = 1
    n_trn_labeled: int = 20  # official split_csbm: 20 training nodes (10 per class)
    n_val: int = 20  # official: 20 validation nodes, also labelled for the SVM (m = 40)


@dataclass(frozen=True)
class CertifyConfig:
    """Defaults of the certificate."""

    C: float = 1.0  # SVM soft-margin constant (official CSBM: 0.001; Cora-MLb GCN: 0.075 — pass per experiment)
    # relative tolerance: margin <= tol * P_t (P_t = C sum_j |Q_tj|) => not certified. Official: Gurobi IntFeasTol =
    # 1e-4 on the count binary of the collective MILP, whose big-M is P_t, lets p_t reach 1e-4 * P_t past zero
    tol: float = 1e-4
    enum_limit: int = 20_000  # "auto" enumerates up to this many QPs (design note: ~1e5 QPs ~ 1 min on 2 CPU cores)
