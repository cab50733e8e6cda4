"""Evaluation metrics: syllable boundary detection, unit clustering quality, and bitrate.

Boundary protocol (SyllableLM notebook, as in Peng et al.): sorted unique boundaries, greedy two-pointer matching
with a tolerance of 50 ms, ``P = hits / n_pred``, ``R = hits / n_ref``, ``F1``, over-segmentation
``OS = R / P - 1`` and ``R-value = 1 - (|r1| + |r2|) / 2`` with ``r1 = sqrt((1 - R)^2 + OS^2)`` and
``r2 = (R - 1 - OS) / sqrt(2)``. The notebook adds 1e-5 to P and R; ``eps`` reproduces that (default 0).

Both sides are always reduced to boundaries the same way (``protocol``):
- ``"official"`` (default): every segment border, the utterance's first onset and last offset included, on both
  sides (the notebook scores all starts and ends of the predicted segments of VAD-trimmed speech against all starts
  and ends of the reference syllables).
- ``"interior"``: the first and last border of each utterance are dropped on both sides, so only boundaries between
  segments are scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "BOUNDARY_PROTOCOLS",
    "bitrate",
    "boundary_scores",
    "clustering_scores",
    "protocol_boundaries",
    "r_value",
    "tune_shift",
]

BOUNDARY_PROTOCOLS = ("official", "interior")


def _is_corpus(x) -> bool:
    """A list/tuple of per-utterance sequences (rather than one flat sequence)."""
    return isinstance(x, (list, tuple)) and len(x) > 0 and np.ndim(x[0]) >= 1


def _as_sorted(name: str, x) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim > 1:
        raise ValueError(
            f"{name} of one utterance must be 1-D boundary times, got shape {arr.shape}; pass a corpus as a list of "
            "1-D sequences (one per utterance)"
        )
    arr = arr.reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite boundary times")
    return np.unique(arr)


def protocol_boundaries(seconds, protocol: str = "official") -> np.ndarray:
    """The sorted unique boundaries of one utterance that ``protocol`` scores (see the module docstring)."""
    if protocol not in BOUNDARY_PROTOCOLS:
        raise ValueError(f"unknown boundary protocol {protocol!r}: expected one of {BOUNDARY_PROTOCOLS}")
    b = _as_sorted("boundaries", seconds)
    return b if protocol == "official" else b[1:-1]


def _match(pred: np.ndarray, ref: np.ndarray, tol: float) -> int:
    """Greedy two-pointer one-to-one matching of sorted boundaries within ``tol`` seconds."""
    i = j = hits = 0
    while i < len(pred) and j < len(ref):
        if abs(pred[i] - ref[j]) <= tol + 1e-9:
            hits += 1
            i += 1
            j += 1
        elif pred[i] < ref[j]:
            i += 1
        else:
            j += 1
    return hits


def r_value(precision: float, recall: float) -> float:
    """R-value of Räsänen et al. (2009) from precision and recall."""
    if precision <= 0:
        return 0.0
    os_ = recall / precision - 1.0
    r1 = math.sqrt((1.0 - recall) ** 2 + os_**2)
    r2 = (recall - 1.0 - os_) / math.sqrt(2.0)
    return 1.0 - (abs(r1) + abs(r2)) / 2.0


def _scores_from_counts(hits: int, n_pred: int, n_ref: int, eps: float) -> dict[str, float]:
    p = hits / n_pred + eps if n_pred else eps
    r = hits / n_ref + eps if n_ref else eps
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    os_ = r / p - 1.0 if p > 0 else 0.0
    return {
        "precision": p,
        "recall": r,
        "f1": f1,
        "os": os_,
        "r_value": r_value(p, r),
        "hits": hits,
        "n_pred": n_pred,
        "n_ref": n_ref,
    }


def _corpus(name: str, x) -> list:
    if not isinstance(x, (list, tuple)) and np.ndim(x) > 1:
        raise ValueError(
            f"{name} has shape {np.shape(x)}: pass one utterance as 1-D boundary times or a corpus as a list of 1-D "
            "sequences (utterances differ in length, so a 2-D array is never a corpus)"
        )
    return list(x) if _is_corpus(x) else [x]


def boundary_scores(
    pred_seconds,
    ref_seconds,
    tolerance: float = 0.05,
    shift: float = 0.0,
    eps: float = 0.0,
    protocol: str = "official",
):
    """Boundary P/R/F1/OS/R-value of one utterance, or of a corpus (a list of per-utterance sequences).

    Predicted and reference borders are reduced by the same ``protocol`` ("official": all borders, "interior": all
    but each utterance's first and last). For a corpus, hits and counts are pooled over utterances before the ratios
    are taken. ``shift`` (seconds) is added to every predicted boundary (tuned with ``tune_shift``).
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if protocol not in BOUNDARY_PROTOCOLS:
        raise ValueError(f"unknown boundary protocol {protocol!r}: expected one of {BOUNDARY_PROTOCOLS}")
    pred_is_corpus, ref_is_corpus = _is_corpus(pred_seconds), _is_corpus(ref_seconds)
    pred_seconds, ref_seconds = _corpus("pred_seconds", pred_seconds), _corpus("ref_seconds", ref_seconds)
    if pred_is_corpus != ref_is_corpus or len(pred_seconds) != len(ref_seconds):
        raise ValueError(
            f"pred_seconds and ref_seconds must both be one utterance or both corpora of the same size, got "
            f"{len(pred_seconds) if pred_is_corpus else 'one utterance'} and "
            f"{len(ref_seconds) if ref_is_corpus else 'one utterance'}"
        )
    hits = n_pred = n_ref = 0
    for p, r in zip(pred_seconds, ref_seconds):
        p = protocol_boundaries(p, protocol) + shift
        r = protocol_boundaries(r, protocol)
        hits += _match(p, r, tolerance)
        n_pred += len(p)
        n_ref += len(r)
    return _scores_from_counts(hits, n_pred, n_ref, eps)


def tune_shift(
    pred_seconds: Sequence, ref_seconds: Sequence, tolerance: float = 0.05, shifts=None, protocol: str = "official"
) -> tuple[float, dict]:
    """Pick the constant shift maximising the pooled R-value (notebook grid: arange(-0.06, 0.031, 0.005))."""
    if shifts is None:
        shifts = np.round(np.arange(-0.06, 0.031, 0.005), 4)
    best = None
    for s in shifts:
        sc = boundary_scores(pred_seconds, ref_seconds, tolerance, shift=float(s), protocol=protocol)
        if best is None or sc["r_value"] > best[1]["r_value"] + 1e-12:
            best = (float(s), sc)
    return best


def _overlap_labels(unit_segments, ref_segments) -> tuple[list, list]:
    """For each reference segment (start, end, label), the unit whose segment overlaps it most."""
    units, labels = [], []
    for rs, re_, lab in ref_segments:
        best, best_ov = None, 0.0
        for us, ue, u in unit_segments:
            ov = min(re_, ue) - max(rs, us)
            if ov > best_ov:
                best, best_ov = u, ov
        if best is not None:
            units.append(best)
            labels.append(lab)
    return units, labels


def clustering_scores(unit_segments, ref_segments) -> dict[str, float]:
    """Cluster purity, syllable purity and syllable-normalized mutual information (SNMI).

    ``unit_segments``/``ref_segments``: per utterance, lists of ``(start, end, label)``; one utterance or a list of
    them. Each reference syllable token is paired with the unit of maximal temporal overlap (ZeroSyl-style). Then
    ``CPur = sum_u max_s n(u, s) / n``, ``SPur = sum_s max_u n(u, s) / n`` and ``SNMI = I(U; S) / H(S)``.
    """
    if unit_segments and not isinstance(unit_segments[0][0], (tuple, list)):
        unit_segments, ref_segments = [unit_segments], [ref_segments]
    units, labels = [], []
    for us, rs in zip(unit_segments, ref_segments):
        u, lab = _overlap_labels(us, rs)
        units += u
        labels += lab
    if not units:
        raise ValueError("no reference segment overlaps any unit segment")
    _, ui = np.unique(np.asarray(units, dtype=object).astype(str), return_inverse=True)
    _, si = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    cont = np.zeros((ui.max() + 1, si.max() + 1))
    np.add.at(cont, (ui, si), 1.0)
    n = cont.sum()
    pj = cont / n
    pu, ps = pj.sum(1), pj.sum(0)
    nz = pj > 0
    mi = float((pj[nz] * np.log(pj[nz] / (pu[:, None] * ps[None, :])[nz])).sum())
    hs = float(-(ps[ps > 0] * np.log(ps[ps > 0])).sum())
    return {
        "cluster_purity": float(cont.max(1).sum() / n),
        "syllable_purity": float(cont.max(0).sum() / n),
        "snmi": mi / hs if hs > 0 else 1.0,
        "n_tokens": int(n),
    }


def bitrate(units, duration_seconds: float, vocab_size: int | None = None) -> dict[str, float]:
    """Storage bitrate ``(tokens / s) * log2(V)`` and entropy bitrate ``(tokens / s) * H(unigram)`` in bits/s.

    ``units`` is one sequence or a list of sequences (a corpus); ``duration_seconds`` the total audio duration.
    """
    if duration_seconds <= 0:
        raise ValueError(f"duration_seconds must be > 0, got {duration_seconds}")
    seqs = units if _is_corpus(units) else [units]
    flat = np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1) for s in seqs]) if seqs else np.zeros(0)
    rate = len(flat) / duration_seconds
    _, counts = np.unique(flat, return_counts=True)
    p = counts / max(counts.sum(), 1)
    entropy = float(-(p * np.log2(p)).sum()) if len(p) else 0.0
    v = vocab_size if vocab_size is not None else max(len(counts), 1)
    return {
        "tokens_per_second": rate,
        "storage_bps": rate * math.log2(v) if v > 1 else 0.0,
        "entropy_bps": rate * entropy,
    }
