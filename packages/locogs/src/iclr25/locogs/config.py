"""Configuration dataclasses. Every default is the paper's / official value; the comment names its source.

Sources: graphdeco-inria/gaussian-splatting ``arguments/__init__.py`` and ``cuda_rasterizer`` (3DGS),
seungjooshin/LocoGS ``arguments/__init__.py`` and ``train.py`` (LocoGS), NVlabs/tiny-cuda-nn ``encodings/grid.h``
(hash grid), gsplat ``rasterization`` (camera conventions).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RasterConfig:
    """Rasterizer constants (graphdeco ``forward.cu`` / gsplat)."""

    eps2d: float = 0.3  # graphdeco forward.cu: cov2D + 0.3*I (gsplat eps2d=0.3)
    near_plane: float = 0.2  # graphdeco in_frustum: p_view.z <= 0.2 culls
    alpha_max: float = 0.99  # graphdeco forward.cu: min(0.99f, opacity * exp(power))
    alpha_min: float = 1.0 / 255.0  # graphdeco forward.cu: skip if alpha < 1/255
    t_min: float = 1e-4  # graphdeco forward.cu: stop if T * (1 - alpha) < 0.0001
    sigma_radius: float = 3.0  # graphdeco: radius = ceil(3 * sqrt(max eigenvalue))
    tile_size: int = 16  # graphdeco BLOCK_X = BLOCK_Y = 16
    bin_size: int = 4  # torch reference: 4-px candidate bins (design note, measured fastest on CPU)
    # "square": pixels whose centre lies in [u +- r] x [v +- r] (exact for a 3-sigma cut, independent of the tile
    # size); "tile": every pixel of each tile_size tile that square touches (graphdeco / gsplat, what their images show)
    footprint: str = "square"

    def __post_init__(self):
        if self.footprint not in ("square", "tile"):
            raise ValueError(f"RasterConfig.footprint must be 'square' or 'tile', got {self.footprint!r}")
        if self.tile_size < 1 or self.bin_size < 1:
            raise ValueError("RasterConfig: tile_size and bin_size must be >= 1")


@dataclass
class Train3DGSConfig:
    """The plain 3DGS baseline (graphdeco ``arguments/__init__.py``, ``train.py``)."""

    iterations: int = 30_000  # OptimizationParams.iterations
    position_lr_init: float = 0.00016  # OptimizationParams.position_lr_init (times scene extent)
    position_lr_final: float = 0.0000016  # OptimizationParams.position_lr_final
    position_lr_delay_mult: float = 0.01  # OptimizationParams.position_lr_delay_mult
    position_lr_max_steps: int = 30_000  # OptimizationParams.position_lr_max_steps
    feature_lr: float = 0.0025  # OptimizationParams.feature_lr (SH rest uses feature_lr / 20)
    opacity_lr: float = 0.05  # OptimizationParams.opacity_lr (original release)
    scaling_lr: float = 0.005  # OptimizationParams.scaling_lr
    rotation_lr: float = 0.001  # OptimizationParams.rotation_lr
    percent_dense: float = 0.01  # OptimizationParams.percent_dense
    lambda_dssim: float = 0.2  # OptimizationParams.lambda_dssim
    densification_interval: int = 100  # OptimizationParams.densification_interval
    opacity_reset_interval: int = 3000  # OptimizationParams.opacity_reset_interval
    densify_from_iter: int = 500  # OptimizationParams.densify_from_iter
    densify_until_iter: int = 15_000  # OptimizationParams.densify_until_iter
    densify_grad_threshold: float = 0.0002  # OptimizationParams.densify_grad_threshold
    min_opacity: float = 0.005  # train.py: densify_and_prune(..., 0.005, ...)
    max_screen_size: float = 20.0  # train.py: size_threshold = 20 after the first opacity reset
    big_scale_fraction: float = 0.1  # gaussian_model.prune: max scale > 0.1 * extent
    sh_degree: int = 3  # ModelParams.sh_degree
    sh_increase_interval: int = 1000  # train.py: oneupSHdegree every 1000 iterations
    init_opacity: float = 0.1  # gaussian_model.create_from_pcd: inverse_sigmoid(0.1)
    adam_eps: float = 1e-15  # gaussian_model.training_setup: Adam eps=1e-15
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)  # ModelParams.white_background=False
    max_gaussians: int = 2_000_000  # not in 3DGS: a safety cap for CPU runs (never reached at paper scale)
    seed: int = 0

    reset_opacity: float = 0.01  # gaussian_model.reset_opacity: min(opacity, 0.01)

    def scaled(self, iterations: int) -> Train3DGSConfig:
        """The same schedule compressed to ``iterations`` steps (every interval scaled by iterations / 30000).

        The opacity-reset interval is never shorter than ``reset_recovery_steps()``: at full length each reset is
        followed by 3000 steps, far more than the Adam steps needed to bring a reset opacity back up; scaling it
        below that recovery time would leave the baseline permanently faded (4 resets in 60 steps at 150 steps).
        Resets that no longer fit before ``densify_until_iter`` are simply not reached."""
        out = _scaled_schedule(self, iterations)
        out["opacity_reset_interval"] = max(out["opacity_reset_interval"], reset_recovery_steps(self))
        return dataclasses.replace(self, **out)


def reset_recovery_steps(cfg: Train3DGSConfig) -> int:
    """Adam steps needed to lift a reset opacity (0.01) back to 0.5: each Adam step moves the logit by at most about
    ``opacity_lr``, so ceil((logit(0.5) - logit(0.01)) / opacity_lr) = 92 with the official lr 0.05."""
    lift = -math.log(cfg.reset_opacity / (1.0 - cfg.reset_opacity))
    return int(math.ceil(lift / cfg.opacity_lr))


def _scaled_schedule(cfg, iterations: int) -> dict:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    f = iterations / cfg.iterations
    out = {"iterations": iterations}
    # mask / SH-mask logits move by about one learning rate per Adam step: scale their learning rates by
    # 30000 / iterations so a compressed schedule can move them as far as the full one (from the initial logit 1 to
    # the pruning threshold logit(0.01) = -4.6 takes >= 560 steps at the official 0.01)
    for name in ("mask_lr", "sh_mask_lr"):
        if hasattr(cfg, name):
            out[name] = getattr(cfg, name) / f
    for name in (
        "position_lr_max_steps",
        "opacity_reset_interval",
        "densify_from_iter",
        "densify_until_iter",
        "sh_increase_interval",
        "sh_mask_start_iter",
        "field_lr_delay_steps",
        "big_prune_from_iter",
    ):
        if hasattr(cfg, name):
            out[name] = max(1, int(round(getattr(cfg, name) * f)))
    # densification / mask-pruning cadence: scaled too, but never below every 10 steps (gradient statistics need
    # several views to average over)
    for name in ("densification_interval", "mask_prune_interval"):
        if hasattr(cfg, name):
            out[name] = max(10, int(round(getattr(cfg, name) * f)))
    return out


@dataclass(frozen=True)
class FieldConfig:
    """The shared neural field (LocoGS ``arguments/__init__.py``; tcnn HashGrid + FullyFusedMLP)."""

    n_levels: int = 16  # LocoGS: hash grid n_levels=16
    features_per_level: int = 2  # LocoGS: n_features_per_level=2
    log2_hashmap_size: int = 19  # LocoGS (-L); 17 for LocoGS-Small (scripts/run_small.sh)
    base_resolution: int = 16  # LocoGS: base_resolution=16
    per_level_scale: float = 1.447269237440378  # LocoGS: exp(ln(4096/16)/15), finest resolution 4096
    mlp_width: int = 64  # LocoGS: FullyFusedMLP n_neurons=64
    mlp_hidden_layers: int = 2  # LocoGS: n_hidden_layers=2
    aabb: tuple[float, float] = (-1.0, 1.0)  # LocoGS contract_to_unisphere: fixed AABB [-1, 1]^3

    @property
    def n_output_dims(self) -> int:
        return self.n_levels * self.features_per_level


@dataclass
class LocoGSConfig:
    """LocoGS training (seungjooshin/LocoGS ``arguments/__init__.py`` and ``train.py``)."""

    field: FieldConfig = field(default_factory=FieldConfig)
    iterations: int = 30_000  # OptimizationParams.iterations
    sh_degree: int = 3  # ModelParams.sh_degree
    position_lr_init: float = 0.00016  # xyz lr (times extent), as 3DGS
    position_lr_final: float = 0.0000016
    position_lr_delay_mult: float = 0.01
    position_lr_max_steps: int = 30_000
    dc_lr: float = 0.0025  # f_dc lr
    scale_base_lr: float = 0.005  # base scale lr
    mask_lr: float = 0.01  # mask logit lr
    sh_mask_lr: float = 0.01  # SH-band mask logit lr
    grid_lr: tuple[float, float] = (0.01, 0.001)  # hash grid lr init -> final
    opacity_mlp_lr: tuple[float, float] = (0.01, 0.001)
    sh_mlp_lr: tuple[float, float] = (0.0025, 0.00025)
    scale_mlp_lr: tuple[float, float] = (0.01, 0.001)
    rotation_mlp_lr: tuple[float, float] = (0.002, 0.0002)
    field_lr_delay_mult: float = 0.01  # delayed schedule: delta(t) = 0.01 + 0.99 sin(pi/2 min(t/5000, 1))
    field_lr_delay_steps: int = 5000
    lambda_dssim: float = 0.2  # 0.8 L1 + 0.2 (1 - SSIM)
    lambda_mask: float = 0.004  # LocoGS; 0.005 Small; 0.001 COLMAP init
    lambda_sh: float = 1e-4  # SH band mask loss weight
    sh_mask_start_iter: int = 15_000  # SH mask loss switched on halfway
    mask_threshold: float = 0.01  # hard mask: sigmoid(m) > 0.01
    densification_interval: int = 100
    densify_from_iter: int = 500
    densify_until_iter: int = 15_000
    densify_grad_threshold: float = 0.0002
    percent_dense: float = 0.01
    min_opacity: float = 0.005
    big_prune_from_iter: int = 3000  # radius > 20 px / scale > 0.1 extent pruning after 3000
    max_screen_size: float = 20.0
    big_scale_fraction: float = 0.1
    mask_prune_interval: int = 1000  # after densification: prune M <= 0.01 every 1000 iterations
    sh_increase_interval: int = 1000
    init_mask_logit: float = 1.0  # sigmoid(1) = 0.73: every Gaussian and band starts on
    init_opacity: float = 0.1  # opacity head bias: sigmoid(MLP + logit(0.1))
    adam_eps: float = 1e-15
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)
    max_gaussians: int = 2_000_000  # safety cap for CPU runs
    seed: int = 0

    def scaled(self, iterations: int) -> LocoGSConfig:
        return dataclasses.replace(self, **_scaled_schedule(self, iterations))


def locogs_preset(name: str) -> LocoGSConfig:
    """The official presets: ``"locogs"`` (log2 T = 19), ``"small"`` (17, lambda_mask 0.005), ``"colmap"`` (0.001)."""
    if name == "locogs":
        return LocoGSConfig()
    if name == "small":
        return LocoGSConfig(field=FieldConfig(log2_hashmap_size=17), lambda_mask=0.005)
    if name == "colmap":
        return LocoGSConfig(lambda_mask=0.001)
    raise ValueError(f"unknown LocoGS preset {name!r}: expected 'locogs', 'small' or 'colmap'")


@dataclass(frozen=True)
class CodecConfig:
    """Post-training compression (LocoGS ``compress_attributes``)."""

    color_bits: int = 8  # f_dc: 8-bit uniform
    scale_bits: int = 8  # base scale: 8-bit uniform
    grid_bits: int = 6  # hash grid: 6-bit after log transform
    morton_bits: int = 21  # Morton code: 21 bits per axis


def clip_width(bits: int) -> float:
    """Quantizer clip half-width in standard deviations, d = 3 + 3 (bits - 1) / 15 (LocoGS quantization_utils)."""
    return 3.0 + 3.0 * (bits - 1) / 15.0


LOG2_PER_LEVEL_SCALE_DEFAULT = math.log2(1.447269237440378)

DEFAULT_RASTER = RasterConfig()
