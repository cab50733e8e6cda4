"""LossPred: syllable boundaries from a masked-prediction teacher's losses (SyllableLM, Sec. 3.1).

For every window centre ``mu`` a 51-frame span ``[mu - 25, mu + 26)`` is masked and the teacher's per-frame loss on
the masked frames is recorded. The loss of masked frame ``t`` is filed under the *visible context frame* ``r`` next to
the mask: the last visible frame before it (``r = mu - 26``, for the first 25 masked frames) or the first visible
frame after it (``r = mu + 26``, for the last 26). ``L[r, t]`` is then high when ``r`` does not help predict ``t``,
i.e. when they lie in different syllables. The affinity ``exp(-L)`` in the ±25 band feeds a normalized-cut DP.

Windows ``gap`` (150) frames apart are masked in one forward pass when the utterance is longer than ``gap`` frames
(150 passes in all); shorter utterances get one pass per window (``T + 50`` passes).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from ._checks import check_finite, check_waveform
from .config import FRAME_RATE, LossPredConfig
from .segment import mincut_segment

__all__ = [
    "MaskedPredictionTeacher",
    "loss_matrix",
    "loss_to_affinity",
    "losspred_segment",
    "mask_schedule",
    "num_losspred_segments",
]


@runtime_checkable
class MaskedPredictionTeacher(Protocol):
    """What LossPred needs from a teacher.

    ``labels(wav)`` gives the prediction targets ``Long[T]`` of an unmasked waveform ``[S]``; ``masked_losses(wav,
    mask, labels)`` runs the teacher on ``wav`` once per row of ``mask`` (``Bool[P, T]``, True = masked) and returns
    the per-frame cross-entropy ``Float[P, T]``.
    """

    def labels(self, wav: torch.Tensor) -> torch.Tensor: ...

    def masked_losses(self, wav: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor: ...


def _halves(window: int) -> tuple[int, int]:
    if window < 2:
        raise ValueError(f"window must be >= 2 frames, got {window}")
    left = (window - 1) // 2  # 25 for 51
    return left, window - left  # (25, 26)


def mask_schedule(num_frames: int, window: int = 51, gap: int = 150) -> list[list[int]]:
    """Window centres masked together in each forward pass.

    Centres run over ``[-left, T + left)`` (``T + 50`` windows for w = 51). If ``T <= gap`` every window is its own
    pass; otherwise pass ``g`` holds the centres with ``(mu + left) % gap == g``.
    """
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    left, _ = _halves(window)
    centres = list(range(-left, num_frames + left))
    if num_frames <= gap:
        return [[mu] for mu in centres]
    return [[mu for mu in centres if (mu + left) % gap == g] for g in range(gap)]


def _window_mask(num_frames: int, centres: list[int], window: int) -> torch.Tensor:
    left, right = _halves(window)
    m = torch.zeros(num_frames, dtype=torch.bool)
    for mu in centres:
        m[max(0, mu - left) : max(0, min(num_frames, mu + right))] = True
    return m


def loss_matrix(
    teacher: MaskedPredictionTeacher,
    wav: torch.Tensor,
    window: int = LossPredConfig.window,
    gap: int = LossPredConfig.gap,
    batch_size: int = LossPredConfig.batch_size,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The LossPred matrix ``L [T, T]`` (rows: context frame, columns: predicted frame) and its write counts."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if wav is not None:  # a custom teacher may take its input in another form; None is left to it
        wav = check_waveform(wav)
    with torch.no_grad():
        labels = teacher.labels(wav)
        t = int(labels.shape[-1])
        left, right = _halves(window)
        schedule = mask_schedule(t, window, gap)
        loss = torch.zeros(t, t, dtype=torch.float32)
        counts = torch.zeros(t, t, dtype=torch.int32)
        for start in range(0, len(schedule), batch_size):
            chunk = schedule[start : start + batch_size]
            masks = torch.stack([_window_mask(t, c, window) for c in chunk])
            losses = teacher.masked_losses(wav, masks, labels).detach().float().cpu()
            if losses.shape != masks.shape:
                raise ValueError(
                    f"teacher returned losses of shape {tuple(losses.shape)}, expected {tuple(masks.shape)}"
                )
            check_finite(losses, "the teacher's masked-prediction losses")
            for row, centres in enumerate(chunk):
                for mu in centres:
                    r = mu - left - 1  # last visible frame before the mask
                    if 0 <= r < t:
                        cols = slice(max(0, mu - left), min(t, mu))
                        loss[r, cols] = losses[row, cols]
                        counts[r, cols] += 1
                    r = mu + right  # first visible frame after the mask
                    if 0 <= r < t:
                        cols = slice(max(0, mu), min(t, mu + right))
                        loss[r, cols] = losses[row, cols]
                        counts[r, cols] += 1
    return loss, counts


def loss_to_affinity(
    loss: torch.Tensor,
    counts: torch.Tensor | None = None,
    window: int = LossPredConfig.window,
    clip: float = LossPredConfig.clip,
) -> torch.Tensor:
    """``A[r, c] = exp(-L[r, c])`` for ``0 < |c - r| <= left`` (25) where written; ``exp(-clip)`` elsewhere."""
    if loss.ndim != 2 or loss.shape[0] != loss.shape[1]:
        raise ValueError(f"loss must be a square matrix, got shape {tuple(loss.shape)}")
    left, _ = _halves(window)
    t = loss.shape[0]
    off = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    band = (off.abs() >= 1) & (off.abs() <= left)
    if counts is not None:
        band &= counts > 0
    return torch.where(band, torch.exp(-loss.clamp(max=clip)), torch.exp(torch.tensor(-clip)))


def num_losspred_segments(
    num_frames: int, sec_per_syllable: float = LossPredConfig.sec_per_syllable, frame_rate: float = FRAME_RATE
) -> int:
    """Number of min-cut segments: ``floor(T / (frame_rate * sec_per_syllable))``, at least 1.

    The notebook sets ``K = floor(T / (50 * 0.16)) + 1`` and K counts *borders* (``0`` and ``T`` included), so the
    segmentation has ``K - 1`` segments.
    """
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    if not sec_per_syllable > 0 or not frame_rate > 0:
        raise ValueError(f"sec_per_syllable and frame_rate must be > 0, got {sec_per_syllable}, {frame_rate}")
    borders = int(num_frames // (frame_rate * sec_per_syllable)) + 1
    return max(borders - 1, 1)


def losspred_segment(
    teacher: MaskedPredictionTeacher,
    wav: torch.Tensor,
    sec_per_syllable: float = LossPredConfig.sec_per_syllable,
    num_segments: int | None = None,
    window: int = LossPredConfig.window,
    gap: int = LossPredConfig.gap,
    batch_size: int = LossPredConfig.batch_size,
    frame_rate: float = FRAME_RATE,
    backend: str = "auto",
) -> torch.Tensor:
    """LossPred boundaries of one waveform (frame indices, ``[0, ..., T]``)."""
    loss, counts = loss_matrix(teacher, wav, window, gap, batch_size)
    aff = loss_to_affinity(loss, counts, window)
    t = loss.shape[0]
    k = num_segments if num_segments is not None else num_losspred_segments(t, sec_per_syllable, frame_rate)
    return mincut_segment(aff, k, min_len=LossPredConfig.min_len, max_len=LossPredConfig.max_len, backend=backend)
