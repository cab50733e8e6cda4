"""Configuration of the DELTA dense 3D tracker.

Every default is the official value. Sources (snap-research/DELTA_densetrack3d, read for understanding only):
``demo.py`` / ``scripts/train/train.py`` (model constructor arguments), ``models/densetrack3d/densetrack3d.py``
(windows, iterations, depth update), ``update_transformer.py`` (EfficientUpdateFormer), ``upsample_transformer.py``
(attention upsampler), ``corr4d_blocks.py`` (Corr4DMLP), ``blocks.py`` (BasicEncoder), ``models/loss.py`` and
``scripts/train/train.py`` (loss weights, optimiser).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass
class DeltaConfig:
    # --- input / geometry -------------------------------------------------------------------------------------------
    model_resolution: tuple[int, int] | None = (384, 512)  # demo.py: model_resolution=(384, 512); None = native size
    stride: int = 4  # DenseTrack3D(stride=4): tracks live on the H/4 feature grid
    upsample_factor: int = 4  # DenseTrack3D(upsample_factor=4): H/4 grid -> full resolution
    depth_min: float = 0.01  # densetrack3d.py: depth clamped to >= 0.01 m
    depth_update_scale: float = 0.1  # densetrack3d.py: d <- d * exp(0.1 * clamp(delta, -50, 50))
    depth_update_clamp: float = 50.0  # idem
    # --- encoder (blocks.py BasicEncoder, CoTracker-style) -----------------------------------------------------------
    encoder_dims: tuple[int, int, int, int] = (64, 96, 128, 128)  # stage widths at H/2, H/4, H/8, H/16
    latent_dim: int = 128  # encoder output / track feature width
    # --- 4D correlation (corr4d_blocks.py, LocoTrack-style) ---------------------------------------------------------
    corr_levels: int = 3  # pyramid [H/2, H/4, H/8]
    corr_radius: int = 3  # 7x7 support and target patches
    corr_mlp_channels: tuple[int, int, int] = (64, 128, 128)  # Corr4DMLP conv widths (k3 s2, k3 s2, k2 s2)
    # --- tokens --------------------------------------------------------------------------------------------------------
    pos_emb_freqs: int = 64  # get_2d_embedding(rel, 64, cat_coords=True) -> 2 + 2*64 = 130 dims
    # --- EfficientUpdateFormer (update_transformer.py) -----------------------------------------------------------------
    hidden_size: int = 384
    num_heads: int = 8
    mlp_ratio: float = 4.0
    num_blocks: int = 6  # space_depth = time_depth = 6
    num_virtual_tracks: int = 64  # DenseTrack3D(num_virtual_tracks=64)
    local_window: int = 6  # 6x6 non-overlapping windows of the dense grid
    anchor_grid: tuple[int, int] = (36, 48)  # DensePredictor3D: 36x48 sparse anchor queries at 384x512
    # --- sliding windows (densetrack3d.py) ----------------------------------------------------------------------------
    window_len: int = 16  # DenseTrack3D(window_len=16)
    train_iters: int = 4  # train.py: train_iters=4
    eval_iters: int = 6  # demo.py / evaluation: iters=6
    # --- upsampler (upsample_transformer.py UpsampleTransformerAlibi) -----------------------------------------------
    upsample_kernel: int = 5
    upsample_heads: int = 4
    upsample_head_dim: int = 48  # 4 heads x 48 = 192 = 128 feature + 64 flow channels
    upsample_blocks: int = 2
    upsample_flow_dim: int = 64  # flow_mlp output width
    # dense full-resolution depth: "absolute" upsamples the H/4 track depth (densetrack3d.py: upsample_with_mask of
    # dense_coords_depths_down); "log_ratio" (our option) upsamples log(d_t / d_0) and multiplies by the input depth
    # of each full-resolution pixel at the query frame, so a dense track starts at its own depth, as a sparse one does
    dense_depth: str = "absolute"
    # --- thresholds ---------------------------------------------------------------------------------------------------
    vis_threshold: float = 0.8  # dense demo (demo.py): visible if sigmoid(vis) > 0.8
    eval_vis_threshold: float = 0.9  # evaluation scripts: vis > 0.9
    # --- training options (not in the official model; see README "Deviations") --------------------------------------
    # zero the update-former output layer and start the upsampler at nearest upsampling, so that the model starts at
    # zero motion (a training initialisation, not an official option)
    zero_init_head: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def window_step(self) -> int:
        """Sliding-window step: half the window (densetrack3d.py: step = window_len // 2)."""
        return self.window_len // 2

    @property
    def corr_patch(self) -> int:
        return 2 * self.corr_radius + 1

    @property
    def corr_dim(self) -> int:
        """Width of the correlation feature: two Corr4DMLP views per level."""
        return self.corr_levels * 2 * self.corr_mlp_channels[-1]

    @property
    def token_dim(self) -> int:
        """[emb2d(x_t - x_0) ([dx, dy], then 2F sin-cos), x_t - x_0 (2), d_t/d_0 (1), corr, dcorr (1), feat, track_mask (1), vis (1)]."""
        return (2 + 2 * self.pos_emb_freqs) + 2 + 1 + self.corr_dim + 1 + self.latent_dim + 1 + 1

    @property
    def upsample_dim(self) -> int:
        return self.upsample_heads * self.upsample_head_dim

    def validate(self) -> DeltaConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} must be divisible by num_heads={self.num_heads}")
        if self.upsample_dim != self.latent_dim + self.upsample_flow_dim:
            raise ValueError(
                f"upsample_heads*upsample_head_dim={self.upsample_dim} must equal latent_dim+upsample_flow_dim="
                f"{self.latent_dim + self.upsample_flow_dim}"
            )
        if self.window_len < 2 or self.window_len % 2:
            raise ValueError(f"window_len must be an even number >= 2, got {self.window_len}")
        if self.stride != 4 or self.upsample_factor != 4:
            raise ValueError("only stride=4 and upsample_factor=4 (the official setting) are supported")
        if self.corr_levels != 3:
            raise ValueError("corr_levels must be 3 (pyramid H/2, H/4, H/8)")
        if self.latent_dim % 8:
            raise ValueError(
                f"latent_dim must be a multiple of 8 (upsampler GroupNorm has latent_dim // 8 groups), got {self.latent_dim}"
            )
        if self.dense_depth not in ("absolute", "log_ratio"):
            raise ValueError(f"dense_depth must be 'absolute' (official) or 'log_ratio', got {self.dense_depth!r}")
        if self.pos_emb_freqs % 2:
            raise ValueError("pos_emb_freqs must be even")
        if self.model_resolution is not None and (self.model_resolution[0] % 16 or self.model_resolution[1] % 16):
            raise ValueError(f"model_resolution must be multiples of 16, got {self.model_resolution}")
        return self

    @classmethod
    def paper(cls) -> DeltaConfig:
        """The official configuration (384x512, 6 blocks, hidden 384, window 16, r=3)."""
        return cls().validate()

    @classmethod
    def tiny(cls) -> DeltaConfig:
        """A CPU-sized preset with the same architecture (used by tests, demo and the CPU training run)."""
        return cls(
            model_resolution=None,
            encoder_dims=(16, 24, 32, 32),
            latent_dim=32,
            corr_radius=2,
            corr_mlp_channels=(16, 32, 32),
            pos_emb_freqs=16,
            hidden_size=96,
            num_heads=4,
            num_blocks=2,
            num_virtual_tracks=16,
            anchor_grid=(4, 4),
            window_len=8,
            train_iters=3,
            eval_iters=4,
            upsample_heads=4,
            upsample_head_dim=12,
            upsample_flow_dim=16,
        ).validate()

    @classmethod
    def micro(cls) -> DeltaConfig:
        """The smallest preset with every architectural piece (unit tests and the CPU speed comparison)."""
        return cls.tiny().replace(
            encoder_dims=(8, 8, 16, 16),
            latent_dim=16,
            corr_radius=1,
            corr_mlp_channels=(16, 16, 16),
            pos_emb_freqs=8,
            hidden_size=32,
            num_heads=2,
            num_blocks=1,
            num_virtual_tracks=4,
            anchor_grid=(2, 2),
            window_len=4,
            train_iters=2,
            eval_iters=2,
            upsample_heads=2,
            upsample_head_dim=12,
            upsample_flow_dim=8,
            upsample_blocks=1,
        )

    def replace(self, **kwargs) -> DeltaConfig:
        return dataclasses.replace(self, **kwargs).validate()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DeltaConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown DeltaConfig fields: {sorted(unknown)}")
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**kw).validate()
