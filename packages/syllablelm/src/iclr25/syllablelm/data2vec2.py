"""The data2vec 2.0 audio encoder used by the released SylBoost checkpoints, as a plain torch module of ours.

Structure (official ``extract_units.py`` config; module names chosen so state-dict keys match the checkpoints):
- ``modality_encoders.AUDIO.local_encoder``: 7 conv layers ``[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2``
  without bias, each followed by a LayerNorm over channels and GELU ("layer_norm" extractor mode);
- ``project_features``: LayerNorm(512) -> Linear(512, 768);
- ``relative_positional_encoder``: 5 x (grouped Conv1d, kernel 95 // 5 = 19, 16 groups; LayerNorm without affine;
  GELU), added to the features;
- ALiBi attention bias ``-|i - j| * slope_h`` times a learned per-head scale (clamped at 0), shared by all blocks;
- ``context_encoder``: LayerNorm, then 4 post-LN blocks ("prenet"); then 8 post-LN ``blocks``. Features are read after
  block ``depth + out_layer`` (official ``out_layer=-2``: the 11th of 12 blocks);
- ``decoder`` (data2vec's 1-D conv decoder) exists only so checkpoints load strictly; it is unused for features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Data2Vec2AudioEncoder", "Data2Vec2Config", "alibi_slopes", "load_sylboost_checkpoint", "manifest"]


@dataclass
class Data2Vec2Config:
    """Defaults: the official ``d2v2_config`` of extract_units.py."""

    conv_layers: list = field(default_factory=lambda: [(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2)
    embed_dim: int = 768
    heads: int = 12
    mlp_ratio: float = 4.0
    prenet_depth: int = 4
    depth: int = 8
    conv_pos_width: int = 95
    conv_pos_groups: int = 16
    conv_pos_depth: int = 5
    norm_eps: float = 1e-5
    decoder_dim: int = 384
    decoder_groups: int = 16
    decoder_kernel: int = 7
    decoder_layers: int = 4
    out_layer: int = -2


class _Transpose(nn.Module):
    def forward(self, x):
        return x.transpose(-2, -1)


class _ChannelNorm(nn.Module):
    """LayerNorm over the channel axis of ``[B, C, T]`` (computed in float32)."""

    def __init__(self, dim: int, affine: bool = True, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps, elementwise_affine=affine)

    def forward(self, x):
        return self.norm(x.transpose(1, 2).float()).transpose(1, 2).type_as(x)


class _ConvLayer(nn.Module):
    """conv (index 0) -> dropout (1) -> channel LayerNorm (2.1) -> GELU: keys ``0.weight``, ``2.1.weight/bias``."""

    def __init__(self, cin: int, cout: int, k: int, s: int):
        super().__init__()
        self.add_module("0", nn.Conv1d(cin, cout, k, stride=s, bias=False))
        self.add_module("1", nn.Identity())
        self.add_module("2", nn.Sequential(_Transpose(), nn.LayerNorm(cout), _Transpose()))

    def forward(self, x):
        x = getattr(self, "0")(x)
        ln = getattr(self, "2")[1]
        x = F.layer_norm(x.transpose(1, 2).float(), ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        return F.gelu(x.transpose(1, 2).type_as(x))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, bias, padding_mask=None):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q * (d // self.heads) ** -0.5) @ k.transpose(-2, -1)
        att = att.float() + bias
        if padding_mask is not None:
            att = att.masked_fill(padding_mask[:, None, None, :], float("-inf"))
        att = att.softmax(-1).type_as(v)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class _Block(nn.Module):
    """Post-LN block: ``x = norm1(x + attn(x)); x = norm2(x + mlp(x))``."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, eps: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x, bias, padding_mask=None):
        x = self.norm1(x + self.attn(x, bias, padding_mask))
        return self.norm2(x + self.mlp(x))


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi head slopes (Press et al.): geometric for powers of two, interleaved otherwise."""

    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(heads).is_integer():
        return torch.tensor(pow2(heads))
    closest = 2 ** math.floor(math.log2(heads))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: heads - closest])


class _PosConv(nn.Module):
    def __init__(self, dim: int, k: int, groups: int):
        super().__init__()
        self.add_module("0", nn.Conv1d(dim, dim, k, padding=k // 2, groups=groups))
        self.k = k

    def forward(self, x):  # [B, C, T]
        x = getattr(self, "0")(x)
        if self.k % 2 == 0:
            x = x[..., :-1]
        x = F.layer_norm(x.transpose(1, 2).float(), (x.shape[1],)).transpose(1, 2).type_as(x)
        return F.gelu(x)


class _ContextEncoder(nn.Module):
    def __init__(self, cfg: Data2Vec2Config):
        super().__init__()
        self.blocks = nn.ModuleList(
            [_Block(cfg.embed_dim, cfg.heads, cfg.mlp_ratio, cfg.norm_eps) for _ in range(cfg.prenet_depth)]
        )
        self.norm = nn.LayerNorm(cfg.embed_dim, eps=cfg.norm_eps)


class _AudioModality(nn.Module):
    def __init__(self, cfg: Data2Vec2Config):
        super().__init__()
        convs, cin = [], 1
        for dim, k, s in cfg.conv_layers:
            convs.append(_ConvLayer(cin, dim, k, s))
            cin = dim
        self.local_encoder = nn.Module()
        self.local_encoder.conv_layers = nn.ModuleList(convs)
        self.project_features = nn.Sequential(_Transpose(), nn.LayerNorm(cin), nn.Linear(cin, cfg.embed_dim))
        k = max(3, cfg.conv_pos_width // cfg.conv_pos_depth)
        self.relative_positional_encoder = nn.Sequential(
            _Transpose(),
            *[_PosConv(cfg.embed_dim, k, cfg.conv_pos_groups) for _ in range(cfg.conv_pos_depth)],
            _Transpose(),
        )
        self.alibi_scale = nn.Parameter(torch.ones(1, 1, cfg.heads, 1, 1))
        self.context_encoder = _ContextEncoder(cfg)
        dec = []
        for i in range(cfg.decoder_layers):
            blk = nn.Module()
            blk.add_module(
                "0",
                nn.Conv1d(
                    cfg.embed_dim if i == 0 else cfg.decoder_dim,
                    cfg.decoder_dim,
                    cfg.decoder_kernel,
                    padding=cfg.decoder_kernel // 2,
                    groups=cfg.decoder_groups,
                ),
            )
            dec.append(blk)
        self.decoder = nn.Module()
        self.decoder.blocks = nn.ModuleList(dec)
        self.decoder.proj = nn.Linear(cfg.decoder_dim, cfg.embed_dim)


class Data2Vec2AudioEncoder(nn.Module):
    """data2vec 2.0 audio encoder; ``forward(wav [B, S]) -> features [B, T, 768]`` of block ``depth + out_layer``."""

    def __init__(self, config: Data2Vec2Config | None = None):
        super().__init__()
        self.config = cfg = config or Data2Vec2Config()
        if cfg.embed_dim % cfg.heads:
            raise ValueError(f"embed_dim={cfg.embed_dim} must be divisible by heads={cfg.heads}")
        self.modality_encoders = nn.ModuleDict({"AUDIO": _AudioModality(cfg)})
        self.blocks = nn.ModuleList(
            [_Block(cfg.embed_dim, cfg.heads, cfg.mlp_ratio, cfg.norm_eps) for _ in range(cfg.depth)]
        )
        self.register_buffer("slopes", alibi_slopes(cfg.heads), persistent=False)

    def num_frames(self, num_samples: int) -> int:
        n = num_samples
        for _, k, s in self.config.conv_layers:
            n = (n - k) // s + 1
        return max(n, 0)

    def forward(self, wav: torch.Tensor, out_layer: int | None = None) -> torch.Tensor:
        if wav.ndim == 1:
            wav = wav[None]
        if wav.ndim != 2:
            raise ValueError(f"wav must be [S] or [B, S], got shape {tuple(wav.shape)}")
        enc = self.modality_encoders["AUDIO"]
        x = wav[:, None].to(enc.alibi_scale.dtype)
        for layer in enc.local_encoder.conv_layers:
            x = layer(x)
        x = enc.project_features(x)  # [B, T, D]
        x = x + enc.relative_positional_encoder(x)
        t = x.shape[1]
        pos = torch.arange(t, device=x.device)
        dist = -(pos[None, :] - pos[:, None]).abs().float()
        bias = self.slopes.to(x.device)[:, None, None] * dist[None]  # [H, T, T]
        bias = bias[None] * enc.alibi_scale.clamp_min(0).squeeze(0).float()  # [1, H, T, T]
        x = enc.context_encoder.norm(x)
        for blk in enc.context_encoder.blocks:
            x = blk(x, bias)
        out_layer = self.config.out_layer if out_layer is None else out_layer
        stop = len(self.blocks) + out_layer if out_layer < 0 else out_layer
        for i, blk in enumerate(self.blocks):
            x = blk(x, bias)
            if i == stop:
                break
        return x


def manifest(config: Data2Vec2Config | None = None) -> dict[str, tuple[int, ...]]:
    """Key -> shape of every parameter an official checkpoint must provide (derived from the module definition)."""
    with torch.device("meta"):
        model = Data2Vec2AudioEncoder(config)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def load_sylboost_checkpoint(path, config: Data2Vec2Config | None = None) -> Data2Vec2AudioEncoder:
    """Load a released SylBoost ``.pth`` (``state['model_seg']`` with a ``model.`` prefix) strictly: every key of
    the manifest must be present with its shape, and no other key may appear."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or "model_seg" not in state:
        raise ValueError(f"{path}: expected a dict with 'model_seg' (a SylBoost checkpoint)")
    sd = {k[len("model.") :] if k.startswith("model.") else k: v for k, v in state["model_seg"].items()}
    sd.pop("_ema", None)
    key = "modality_encoders.AUDIO.alibi_scale"
    if key in sd and sd[key].dim() == 4:  # older checkpoints store it without the layer axis
        sd[key] = sd[key].unsqueeze(0)
    want = manifest(config)
    missing = sorted(set(want) - set(sd))
    extra = sorted(set(sd) - set(want))
    if missing or extra:
        raise KeyError(f"{path}: missing keys {missing[:5]}, unexpected keys {extra[:5]}")
    for k, shape in want.items():
        if tuple(sd[k].shape) != shape:
            raise ValueError(f"{path}: {k} has shape {tuple(sd[k].shape)}, expected {shape}")
    model = Data2Vec2AudioEncoder(config)
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    return model.eval()
