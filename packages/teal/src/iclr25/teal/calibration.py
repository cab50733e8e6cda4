"""TEAL calibration: dense capture of the four activation distributions per block, histograms, thresholds.

For every decoder layer, the inputs of q (= k = v), o, gate (= up) and down are captured on calibration text with the
model running dense. Each distribution is summarised as the official histogram (10,000 bins: equal-width bins between
the 1 % and 99 % order statistics plus two outer bins reaching the minimum and maximum; official
``ActivationModule.find_histogram``) and, in addition, as a grid of exact |x| quantiles.

Thresholds for a target sparsity s:

* ``"teal_symmetric"`` (official): t(s) = F^{-1}(0.5 + s/2), where F is the signed CDF read off the histogram
  (cumulative counts, linear interpolation between adjacent bin centres). Exact only for a symmetric, zero-mean
  distribution.
* ``"abs_quantile"`` (ours): t(s) = the s-quantile of |x|, so the realized sparsity on the calibration data is s
  whatever the skew.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from iclr25.shared import atomic_write, progress

from .config import CAPTURE_PROJECTION, DISTRIBUTION_OF, DISTRIBUTIONS, THRESHOLD_MODES, CalibrationConfig
from .modules import check_token_ids, find_blocks, fingerprint_mismatch, model_fingerprint
from .teal_linear import TealLinear

FORMAT_VERSION = 1
# Official on-disk layout: <dir>/layer-<i>/{self_attn,mlp}/histograms.pt with keys h1, h1_centers, h2, h2_centers.
OFFICIAL_KEYS = {"attn_h1": ("self_attn", "h1"), "attn_h2": ("self_attn", "h2"), "mlp_h1": ("mlp", "h1"),
                 "mlp_h2": ("mlp", "h2")}  # fmt: skip


def check_sparsity(sparsity: float, what: str = "sparsity") -> float:
    """Validate a sparsity level: a real number in [0, 1)."""
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)):
        raise TypeError(f"{what} must be a float in [0, 1), got {type(sparsity).__name__}")
    s = float(sparsity)
    if not (0.0 <= s < 1.0) or math.isnan(s):
        raise ValueError(f"{what} must be in [0, 1), got {sparsity}")
    return s


@dataclass
class ActivationHistogram:
    """One activation distribution: official-layout histogram plus (optionally) exact |x| quantiles."""

    counts: torch.Tensor  # [num_bins] float64
    centers: torch.Tensor  # [num_bins] float64
    abs_quantiles: torch.Tensor | None = None  # [M] |x| at levels j / (M - 1), float64

    def __post_init__(self):
        if self.counts.dim() != 1 or self.counts.shape != self.centers.shape or self.counts.numel() < 2:
            raise ValueError(
                f"histogram counts and centers must be 1-D of equal length >= 2, got "
                f"{tuple(self.counts.shape)} and {tuple(self.centers.shape)}"
            )
        self.counts = self.counts.double()
        self.centers = self.centers.double()
        if not torch.isfinite(self.centers).all():
            bad = int((~torch.isfinite(self.centers)).sum())
            raise ValueError(f"histogram centres must be finite numbers, got {bad} NaN/inf centre(s)")
        if bool((self.centers[1:] < self.centers[:-1]).any()):
            raise ValueError("histogram centres must be sorted in non-decreasing order")
        if not torch.isfinite(self.counts).all() or bool((self.counts < 0).any()):
            raise ValueError("histogram counts must be finite and non-negative")
        self.cumulative = torch.cumsum(self.counts, 0)
        self.total = float(self.cumulative[-1])
        if not self.total > 0:
            raise ValueError("histogram is empty (total count 0)")
        if self.abs_quantiles is not None:
            self.abs_quantiles = self.abs_quantiles.double()

    @classmethod
    def from_values(cls, values: torch.Tensor, config: CalibrationConfig | None = None) -> ActivationHistogram:
        """Build the histogram (official layout) and the |x| quantile grid from a flat sample of activations."""
        cfg = config or CalibrationConfig()
        v = values.detach().reshape(-1)
        if not v.is_floating_point():
            raise TypeError(f"activations must be floating point, got {v.dtype}")
        v = v.float() if v.dtype in (torch.float16, torch.bfloat16) else v
        n = v.numel()
        if n < 2:
            raise ValueError(f"need at least 2 activation values to build a histogram, got {n}")
        if not torch.isfinite(v).all():
            raise ValueError("activations contain NaN or inf; calibrate the model in a dtype where it is finite")
        sv = torch.sort(v).values
        k = int(cfg.outlier_fraction * n)
        lower, upper = float(sv[k]), float(sv[n - max(k, 1)])
        inner = torch.linspace(lower, upper, cfg.num_bins - 1, dtype=torch.float64)
        edges = torch.cat([sv[:1].double(), inner, sv[-1:].double()])
        # counts of [e_i, e_{i+1}) (the last bin closed), read off the sorted sample
        pos = torch.searchsorted(sv.double() if sv.dtype != torch.float64 else sv, edges, side="left")
        pos[-1] = n
        counts = torch.diff(pos).double()
        centers = (edges[:-1] + edges[1:]) / 2
        levels = torch.linspace(0.0, 1.0, cfg.num_abs_quantiles, dtype=torch.float64)
        ranks = torch.ceil(levels * n).long().clamp(1, n)  # |x| at rank ceil(q n): fraction <= it is >= q
        return cls(counts=counts, centers=centers, abs_quantiles=abs_order_statistics(sv, ranks))

    def icdf(self, q: float) -> float:
        """Official inverse CDF: the value below which a fraction ``q`` of the mass lies (interpolated)."""
        target = q * self.total
        idx = int(torch.searchsorted(self.cumulative, torch.tensor([target], dtype=torch.float64))[0])
        if idx == 0:
            return float(self.centers[0])
        if idx >= self.centers.numel():
            return float(self.centers[-1])
        c0, c1 = float(self.cumulative[idx - 1]), float(self.cumulative[idx])
        x0, x1 = float(self.centers[idx - 1]), float(self.centers[idx])
        frac = (target - c0) / (c1 - c0) if c1 > c0 else 0.0
        return x0 + frac * (x1 - x0)

    def threshold(self, sparsity: float, mode: str = "teal_symmetric") -> float:
        """Magnitude threshold giving ``sparsity``; 0 for sparsity 0 (the layer stays exactly dense)."""
        s = check_sparsity(sparsity)
        if mode not in THRESHOLD_MODES:
            raise ValueError(f"mode must be one of {THRESHOLD_MODES}, got {mode!r}")
        if s == 0.0:
            return 0.0
        if mode == "teal_symmetric":
            return max(0.0, self.icdf(0.5 + s / 2))
        if self.abs_quantiles is None:
            raise ValueError("this histogram has no |x| quantiles (official files); use mode='teal_symmetric'")
        pos = s * (self.abs_quantiles.numel() - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, self.abs_quantiles.numel() - 1)
        w = pos - lo
        return float((1 - w) * self.abs_quantiles[lo] + w * self.abs_quantiles[hi])


def abs_order_statistics(sorted_values: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    """The ``ranks``-th smallest (1-based) of |x| given x sorted ascending, without sorting |x|.

    |x| sorted is the merge of the negated negative part (reversed) and the non-negative part; the k-th smallest of
    two sorted arrays is found by a vectorised binary search on how many elements come from the first array.
    """
    n_neg = int(torch.searchsorted(sorted_values, torch.zeros((), dtype=sorted_values.dtype)))
    a = (-sorted_values[:n_neg]).flip(0).double()  # ascending magnitudes of the negatives
    b = sorted_values[n_neg:].double()  # ascending non-negatives
    na, nb = a.numel(), b.numel()
    k = ranks.long()
    lo = (k - nb).clamp(min=0)
    hi = torch.minimum(k, torch.full_like(k, na))
    inf = torch.tensor([float("inf")], dtype=torch.float64)
    a_ext = torch.cat([-inf, a, inf])  # a_ext[i + 1] = a[i]; a[-1] = -inf, a[na] = +inf
    b_ext = torch.cat([-inf, b, inf])
    while bool((lo < hi).any()):
        mid = (lo + hi) // 2
        # take `mid` from a: valid if a[mid] >= b[k - mid - 1]; if a[mid] < b[k - mid - 1], take more from a
        more = a_ext[mid + 1] < b_ext[k - mid]
        lo = torch.where((lo < hi) & more, mid + 1, lo)
        hi = torch.where((lo < hi) & ~more, mid, hi)
    i = lo
    return torch.maximum(a_ext[i], b_ext[k - i])


class CalibrationResult:
    """Per (layer, distribution) histograms; thresholds per (layer, projection, sparsity)."""

    def __init__(
        self,
        histograms: dict[tuple[int, str], ActivationHistogram],
        num_tokens: int = 0,
        fingerprint: dict | None = None,
    ):
        if not histograms:
            raise ValueError("a calibration needs at least one histogram")
        layers = sorted({layer for layer, _ in histograms})
        if layers != list(range(len(layers))):
            raise ValueError(f"calibration layers must be 0..L-1, got {layers}")
        for layer in layers:
            missing = [d for d in DISTRIBUTIONS if (layer, d) not in histograms]
            if missing:
                raise ValueError(f"calibration of layer {layer} misses distributions {missing}")
        if fingerprint is not None and fingerprint.get("num_layers") != len(layers):
            raise ValueError(
                f"calibration fingerprint says {fingerprint.get('num_layers')} layers but it holds {len(layers)}"
            )
        self.histograms = histograms
        self.num_layers = len(layers)
        self.num_tokens = num_tokens
        # the model it was made on (iclr25.teal.modules.model_fingerprint); None for official histogram folders
        self.fingerprint = fingerprint

    def check_model(self, model: nn.Module) -> None:
        """Raise ``ValueError`` unless this calibration was made on a model of ``model``'s architecture."""
        actual = model_fingerprint(model)
        if self.fingerprint is None:  # official files: only the layer count can be checked
            if actual["num_layers"] != self.num_layers:
                raise ValueError(
                    f"calibration has {self.num_layers} layers but the model has {actual['num_layers']}: "
                    "it was made on a different model"
                )
            return
        diff = fingerprint_mismatch(self.fingerprint, actual)
        if diff:
            raise ValueError(f"this calibration was made on a different model ({diff}); recalibrate on this model")

    def histogram(self, layer: int, proj: str) -> ActivationHistogram:
        if proj not in DISTRIBUTION_OF:
            raise ValueError(f"unknown projection {proj!r}; expected one of {tuple(DISTRIBUTION_OF)}")
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer {layer} out of range: calibration has {self.num_layers} layers")
        return self.histograms[(layer, DISTRIBUTION_OF[proj])]

    def threshold(self, layer: int, proj: str, sparsity: float, mode: str = "teal_symmetric") -> float:
        return self.histogram(layer, proj).threshold(sparsity, mode)

    # -- persistence ------------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write all histograms to one ``.pt`` file (atomically)."""
        state = {"format": "iclr25.teal.calibration", "version": FORMAT_VERSION, "num_tokens": self.num_tokens,
                 "fingerprint": self.fingerprint, "histograms": {}}  # fmt: skip
        for (layer, dist), h in self.histograms.items():
            entry = {"counts": h.counts, "centers": h.centers}
            if h.abs_quantiles is not None:
                entry["abs_quantiles"] = h.abs_quantiles
            state["histograms"][f"{layer}/{dist}"] = entry
        with atomic_write(path, "wb") as fh:
            torch.save(state, fh)

    @classmethod
    def load(cls, path: str | Path) -> CalibrationResult:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no calibration file at {path}")
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != "iclr25.teal.calibration":
            raise ValueError(f"{path} is not an iclr25.teal calibration file")
        if state.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path} has calibration format version {state.get('version')}, expected {FORMAT_VERSION}")
        hists = {}
        for key, entry in state["histograms"].items():
            layer, dist = key.split("/")
            hists[(int(layer), dist)] = ActivationHistogram(
                entry["counts"], entry["centers"], entry.get("abs_quantiles")
            )
        return cls(hists, num_tokens=int(state.get("num_tokens", 0)), fingerprint=state.get("fingerprint"))

    def save_teal_histograms(self, directory: str | Path) -> None:
        """Write the official layout ``layer-<i>/{self_attn,mlp}/histograms.pt`` (counts and centres, float32)."""
        directory = Path(directory)
        for layer in range(self.num_layers):
            for sub in ("self_attn", "mlp"):
                state = {}
                for dist, (s, key) in OFFICIAL_KEYS.items():
                    if s == sub:
                        h = self.histograms[(layer, dist)]
                        state[key] = h.counts.float()
                        state[f"{key}_centers"] = h.centers.float()
                with atomic_write(directory / f"layer-{layer}" / sub / "histograms.pt", "wb") as fh:
                    torch.save(state, fh)


def load_teal_histograms(directory: str | Path) -> CalibrationResult:
    """Read the official calibration layout (e.g. ``models/Llama-2-7B/histograms`` of FasterDecoding/TEAL).

    Official files hold no |x| quantiles, so only ``mode="teal_symmetric"`` thresholds are available from them.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a directory of layer-<i>/ histograms")
    layer_dirs = sorted(
        (p for p in directory.iterdir() if p.is_dir() and p.name.startswith("layer-") and p.name[6:].isdigit()),
        key=lambda p: int(p.name[6:]),
    )
    if not layer_dirs:
        raise ValueError(f"{directory} holds no layer-<i>/ folders")
    hists = {}
    for p in layer_dirs:
        layer = int(p.name[6:])
        loaded = {}
        for sub in ("self_attn", "mlp"):
            f = p / sub / "histograms.pt"
            if not f.is_file():
                raise ValueError(f"missing {f}")
            loaded[sub] = torch.load(f, map_location="cpu", weights_only=True)
        for dist, (sub, key) in OFFICIAL_KEYS.items():
            state = loaded[sub]
            if key not in state or f"{key}_centers" not in state:
                raise ValueError(f"{p / sub / 'histograms.pt'} lacks keys {key!r} and {key + '_centers'!r}")
            hists[(layer, dist)] = ActivationHistogram(
                torch.as_tensor(state[key]), torch.as_tensor(state[f"{key}_centers"])
            )
    return CalibrationResult(hists)


def _check_batches(batches: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    if isinstance(batches, torch.Tensor):
        batches = [batches]
    out = []
    for i, b in enumerate(batches):
        if not isinstance(b, torch.Tensor) or b.dtype != torch.long or b.dim() != 2:
            raise ValueError(f"batch {i} must be a LongTensor of input_ids [B, T], got {getattr(b, 'shape', type(b))}")
        if b.shape[1] < 2:
            raise ValueError(f"batch {i} has {b.shape[1]} token(s); calibration uses prefill batches with T >= 2")
        out.append(b)
    if not out:
        raise ValueError("the calibration set is empty: pass at least one [B, T] batch of input_ids")
    return out


@torch.no_grad()
def capture_activations(
    model: nn.Module, batches: Iterable[torch.Tensor], *, max_values: int | None = None, seed: int = 0
) -> dict[tuple[int, str], torch.Tensor]:
    """Dense inputs of q, o, gate and down in every block (flattened float32, on CPU), over all batches.

    With ``max_values``, each distribution keeps a seeded Bernoulli subsample of about that many values (so a 7B
    model does not need tens of GB of host memory); otherwise every value is kept, as in the official code.
    """
    blocks = find_blocks(model)
    if any(isinstance(m, TealLinear) for m in model.modules()):
        raise ValueError("calibrate a dense model: remove the TEAL wrappers first (handle.remove())")
    batches = _check_batches(batches)
    for i, b in enumerate(batches):
        check_token_ids(model, b, f"calibration batch {i}")
    store: dict[tuple[int, str], list[torch.Tensor]] = {(b.index, d): [] for b in blocks for d in DISTRIBUTIONS}
    hooks = []

    total_tokens = sum(b.numel() for b in batches)
    gen = torch.Generator().manual_seed(seed)

    def make_hook(key):
        def hook(_mod, args):
            values = args[0].detach().reshape(-1).float().cpu()
            keep = 1.0 if max_values is None else min(1.0, max_values / (total_tokens * args[0].shape[-1]))
            if keep < 1.0:
                values = values[torch.rand(values.numel(), generator=gen) < keep]
            store[key].append(values)

        return hook

    for b in blocks:
        for dist, proj in CAPTURE_PROJECTION.items():
            hooks.append(b.module(proj).register_forward_pre_hook(make_hook((b.index, dist))))
    device = next(model.parameters()).device
    try:
        for batch in progress(batches, desc="calibrate"):
            model(input_ids=batch.to(device), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return {k: torch.cat(v) for k, v in store.items()}


def calibrate(
    model: nn.Module, batches: Iterable[torch.Tensor], config: CalibrationConfig | None = None
) -> CalibrationResult:
    """Run the dense model on ``batches`` (iterable of input_ids ``[B, T]``) and build every block's histograms.

    The official code runs one layer at a time to save GPU memory; the captured values are the same as those of one
    dense forward pass with input hooks, which is what this does.
    """
    cfg = config or CalibrationConfig()
    batches = _check_batches(batches)
    acts = capture_activations(model, batches, max_values=cfg.max_values, seed=cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    hists = {}
    for key, values in acts.items():
        if values.numel() > cfg.max_values:
            values = values[torch.randperm(values.numel(), generator=gen)[: cfg.max_values]]
        hists[key] = ActivationHistogram.from_values(values, cfg)
    return CalibrationResult(hists, num_tokens=sum(b.numel() for b in batches), fingerprint=model_fingerprint(model))
