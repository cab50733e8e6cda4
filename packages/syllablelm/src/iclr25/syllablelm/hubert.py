"""A HuBERT-style masked-prediction teacher on ``transformers.HubertModel`` (random or locally loaded weights).

``HubertTeacher`` adds fairseq HuBERT's prediction head: ``logits = cos(final_proj(h_t), label_embs) / logit_temp``
and per-frame cross-entropy against discrete targets. It implements ``MaskedPredictionTeacher`` (LossPred) through
``transformers.HubertModel(..., mask_time_indices=mask)``, which swaps masked frames for the learned mask embedding
before the transformer, exactly as fairseq's ``mask_override`` does. ``fairseq_to_hf_key`` maps a fairseq HuBERT
state dict (``hubert_base_ls960.pt`` layout) to this module.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers import HubertConfig, HubertModel

from ._checks import check_waveform
from ._keymap import rename_key
from .config import LossPredConfig

__all__ = [
    "HubertTeacher",
    "LayerKMeansLabels",
    "convert_fairseq_state_dict",
    "fairseq_to_hf_key",
    "small_hubert_config",
]


def small_hubert_config(hidden: int = 96, layers: int = 3, heads: int = 4, conv_dim: int = 64) -> HubertConfig:
    """A small HuBERT config with the standard 7-layer conv stack (400-sample receptive field, 320 hop = 50 Hz)."""
    return HubertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        conv_dim=(conv_dim,) * 7,
        conv_stride=(5, 2, 2, 2, 2, 2, 2),
        conv_kernel=(10, 3, 3, 3, 3, 2, 2),
        num_conv_pos_embeddings=32,
        num_conv_pos_embedding_groups=4,
        feat_extract_norm="group",
        do_stable_layer_norm=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        feat_proj_dropout=0.0,
        layerdrop=0.0,
        mask_time_prob=0.0,
        apply_spec_augment=True,
    )


class HubertTeacher(nn.Module):
    """HuBERT encoder + cosine prediction head over ``num_classes`` discrete targets."""

    def __init__(
        self,
        config: HubertConfig,
        num_classes: int,
        final_dim: int = 32,
        logit_temp: float = LossPredConfig.logit_temp,
        label_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.hubert = HubertModel(config)
        if not hasattr(self.hubert, "masked_spec_embed"):  # HF only creates it when random masking is configured
            self.hubert.masked_spec_embed = nn.Parameter(torch.empty(config.hidden_size).uniform_())
        self.final_proj = nn.Linear(config.hidden_size, final_dim)
        self.label_embs_concat = nn.Parameter(torch.randn(num_classes, final_dim) * 0.1)
        self.logit_temp = logit_temp
        self.label_fn = label_fn

    @classmethod
    def from_fairseq(
        cls,
        path,
        config: HubertConfig,
        num_classes: int,
        final_dim: int,
        label_fn=None,
        logit_temp: float = LossPredConfig.logit_temp,
    ) -> HubertTeacher:
        """Load a fairseq HuBERT checkpoint (e.g. ``hubert_large_ll60k.pt``) strictly into a teacher built from
        ``config`` (the matching transformers config; HuBERT-Large: hidden 1024, 24 layers, layer-norm extractor,
        stable layer norm)."""
        state = torch.load(path, map_location="cpu", weights_only=False)
        model = cls(config, num_classes, final_dim, logit_temp=logit_temp, label_fn=label_fn)
        model.load_state_dict(convert_fairseq_state_dict(state), strict=True)
        return model.eval()

    @property
    def config(self) -> HubertConfig:
        return self.hubert.config

    def num_frames(self, num_samples: int) -> int:
        n = num_samples
        for k, s in zip(self.config.conv_kernel, self.config.conv_stride):
            n = (n - k) // s + 1
        return max(n, 0)

    def _wav(self, wav: torch.Tensor) -> torch.Tensor:
        wav = check_waveform(wav, batched=True).float()
        if wav.ndim == 1:
            wav = wav.unsqueeze(0)
        if wav.shape[-1] < 400:
            raise ValueError(f"wav needs at least 400 samples (one 25 ms frame), got {wav.shape[-1]}")
        return wav.to(self.final_proj.weight.device)

    def hidden_states(self, wav: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """All hidden states (index 0 = transformer input after the conv stack, i = output of layer i)."""
        out = self.hubert(self._wav(wav), mask_time_indices=mask, output_hidden_states=True)
        return out.hidden_states

    def features(self, wav: torch.Tensor, layer: int = -1) -> torch.Tensor:
        """Frame features ``[B, T, H]`` of hidden layer ``layer`` (no masking)."""
        return self.hidden_states(wav)[layer]

    def logits(self, wav: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._head(self.hubert(self._wav(wav), mask_time_indices=mask).last_hidden_state)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        proj = F.normalize(self.final_proj(h), dim=-1)
        emb = F.normalize(self.label_embs_concat, dim=-1)
        return proj @ emb.T / self.logit_temp

    # --- MaskedPredictionTeacher -------------------------------------------------------------------------------
    def labels(self, wav: torch.Tensor) -> torch.Tensor:
        if self.label_fn is None:
            raise ValueError("this teacher has no label_fn: pass label_fn= (e.g. MFCC k-means) to HubertTeacher")
        lab = torch.as_tensor(self.label_fn(wav)).long().reshape(-1)
        n = self.num_frames(self._wav(wav).shape[-1])
        if lab.numel() != n:
            raise ValueError(f"label_fn gave {lab.numel()} labels for {n} frames")
        return lab

    def masked_losses(self, wav: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        w = self._wav(wav)
        if w.shape[0] != 1:
            raise ValueError("masked_losses takes one waveform and a batch of masks")
        mask = mask.to(w.device)
        # HubertModel.forward, with the conv stack run once for all masks (masking happens after it)
        hub = self.hubert
        conv = hub.feature_projection(hub.feature_extractor(w).transpose(1, 2))
        hidden = conv.expand(mask.shape[0], -1, -1).clone()
        hidden = hub._mask_hidden_states(hidden, mask_time_indices=mask)
        logits = self._head(hub.encoder(hidden).last_hidden_state)
        target = labels.to(w.device).view(1, -1).expand(mask.shape[0], -1)
        return F.cross_entropy(logits.transpose(1, 2), target, reduction="none")


class LayerKMeansLabels:
    """``label_fn`` of the official recipe: nearest k-means centroid of a HuBERT layer's unmasked features
    (``hubert_base_ls960`` layer 9 with the km500 quantizer, ``centroids [500, 768]``)."""

    def __init__(self, model: HubertTeacher, layer: int, centroids):
        self.model = model.eval()
        self.layer = layer
        self.centroids = torch.as_tensor(centroids).float()

    def __call__(self, wav) -> torch.Tensor:
        from .kernels import kmeans_assign

        with torch.no_grad():
            feats = self.model.hidden_states(torch.as_tensor(wav))[self.layer][0]
        return kmeans_assign(feats.float(), self.centroids.to(feats.device))


_FAIRSEQ_RULES: list[tuple[str, str]] = [
    (r"^feature_extractor\.conv_layers\.(\d+)\.0\.weight$", r"hubert.feature_extractor.conv_layers.\1.conv.weight"),
    (
        r"^feature_extractor\.conv_layers\.(\d+)\.2\.(weight|bias)$",
        r"hubert.feature_extractor.conv_layers.\1.layer_norm.\2",
    ),
    (
        r"^feature_extractor\.conv_layers\.(\d+)\.2\.1\.(weight|bias)$",
        r"hubert.feature_extractor.conv_layers.\1.layer_norm.\2",
    ),
    (r"^layer_norm\.(weight|bias)$", r"hubert.feature_projection.layer_norm.\1"),
    (r"^post_extract_proj\.(weight|bias)$", r"hubert.feature_projection.projection.\1"),
    (r"^mask_emb$", r"hubert.masked_spec_embed"),
    (r"^encoder\.pos_conv\.0\.weight_g$", r"hubert.encoder.pos_conv_embed.conv.parametrizations.weight.original0"),
    (r"^encoder\.pos_conv\.0\.weight_v$", r"hubert.encoder.pos_conv_embed.conv.parametrizations.weight.original1"),
    (r"^encoder\.pos_conv\.0\.bias$", r"hubert.encoder.pos_conv_embed.conv.bias"),
    (r"^encoder\.layer_norm\.(weight|bias)$", r"hubert.encoder.layer_norm.\1"),
    (
        r"^encoder\.layers\.(\d+)\.self_attn\.(k|v|q|out)_proj\.(weight|bias)$",
        r"hubert.encoder.layers.\1.attention.\2_proj.\3",
    ),
    (r"^encoder\.layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)$", r"hubert.encoder.layers.\1.layer_norm.\2"),
    (r"^encoder\.layers\.(\d+)\.fc1\.(weight|bias)$", r"hubert.encoder.layers.\1.feed_forward.intermediate_dense.\2"),
    (r"^encoder\.layers\.(\d+)\.fc2\.(weight|bias)$", r"hubert.encoder.layers.\1.feed_forward.output_dense.\2"),
    (r"^encoder\.layers\.(\d+)\.final_layer_norm\.(weight|bias)$", r"hubert.encoder.layers.\1.final_layer_norm.\2"),
    (r"^final_proj\.(weight|bias)$", r"final_proj.\1"),
    (r"^label_embs_concat$", r"label_embs_concat"),
]


def fairseq_to_hf_key(key: str) -> str | None:
    """Our module's key for a fairseq HuBERT key, or ``None`` when it has no counterpart."""
    return rename_key(key, _FAIRSEQ_RULES)


def convert_fairseq_state_dict(state: dict) -> dict:
    """Rename a fairseq HuBERT ``model`` state dict to ``HubertTeacher`` keys; raises on unknown keys."""
    if "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    out, unknown = {}, []
    for k, v in state.items():
        nk = fairseq_to_hf_key(k)
        if nk is None:
            unknown.append(k)
        else:
            out[nk] = v
    if unknown:
        raise KeyError(f"fairseq keys without a mapping: {unknown[:8]}{' ...' if len(unknown) > 8 else ''}")
    return out
