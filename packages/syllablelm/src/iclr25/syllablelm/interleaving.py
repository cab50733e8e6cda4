"""Interleaved vocoder LM layout (ELLA-V style, official strategy 5) and its greedy short-unit decoding.

Joint vocabulary: short units ``0..S-1`` (mHuBERT-25 Hz, S = 1024 reserved), ``SHORT_STOP = S``, long (syllable)
units at ``S + 1 + u``, ``LONG_STOP = S + 1 + L``. For each syllable: ``[LONG(u_i), LONG_STOP]`` then the
deduplicated short units whose midpoint (in 50 Hz frames; 25 Hz durations are doubled) lies at or before the next
syllable's start minus ``lookahead`` (5) frames, then ``SHORT_STOP``; after the last syllable all remaining short
units follow. Only short tokens (and SHORT_STOP) are predicted (the loss is restricted to short logits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

__all__ = ["InterleavedVocab", "Vocoder", "deinterleave", "dedup_with_durations", "greedy_short_units", "interleave"]


@dataclass(frozen=True)
class InterleavedVocab:
    short: int = 1024  # mHuBERT km500, 1024 ids reserved (official)
    long: int = 8192  # syllable units

    @property
    def short_stop(self) -> int:
        return self.short

    @property
    def long_offset(self) -> int:
        return self.short + 1

    @property
    def long_stop(self) -> int:
        return self.short + 1 + self.long

    @property
    def size(self) -> int:
        return self.long_stop + 1


def dedup_with_durations(units: Sequence[int]) -> tuple[list[int], list[int]]:
    """Run-length encode a frame-level unit sequence: (unique consecutive units, durations in frames)."""
    out, dur = [], []
    for u in units:
        if out and out[-1] == int(u):
            dur[-1] += 1
        else:
            out.append(int(u))
            dur.append(1)
    return out, dur


def interleave(
    short_units: Sequence[int],
    short_durations: Sequence[int],
    long_units: Sequence[int],
    long_starts: Sequence[int],
    vocab: InterleavedVocab | None = None,
    lookahead: int = 5,
    short_rate_factor: int = 2,
) -> tuple[list[int], list[int]]:
    """Tokens of the interleaved sequence, and the short-unit durations in emission order (for the vocoder).

    short units are deduplicated units with durations at 25 Hz; ``long_starts`` are syllable starts at 50 Hz.
    """
    v = vocab or InterleavedVocab()
    if len(short_units) != len(short_durations):
        raise ValueError("short_units and short_durations differ in length")
    if len(long_units) != len(long_starts):
        raise ValueError("long_units and long_starts differ in length")
    if any(not 0 <= u < v.short for u in short_units) or any(not 0 <= u < v.long for u in long_units):
        raise ValueError("unit ids out of range of the vocabulary")
    dur50 = np.asarray(short_durations, dtype=np.float64) * short_rate_factor
    starts = np.concatenate([[0.0], np.cumsum(dur50)[:-1]]) if len(dur50) else np.zeros(0)
    mids = starts + dur50 / 2
    tokens: list[int] = []
    durs: list[int] = []
    p = 0
    for i, u in enumerate(long_units):
        tokens += [v.long_offset + int(u), v.long_stop]
        last = i == len(long_units) - 1
        while p < len(short_units) and (last or mids[p] <= long_starts[i + 1] - lookahead):
            tokens.append(int(short_units[p]))
            durs.append(int(short_durations[p]))
            p += 1
        tokens.append(v.short_stop)
    return tokens, durs


def deinterleave(tokens: Sequence[int], vocab: InterleavedVocab | None = None) -> tuple[list[int], list[list[int]]]:
    """Inverse of ``interleave``: (long units, short units of each syllable span)."""
    v = vocab or InterleavedVocab()
    longs: list[int] = []
    spans: list[list[int]] = []
    i = 0
    while i < len(tokens):
        t = int(tokens[i])
        if not v.long_offset <= t < v.long_stop:
            raise ValueError(f"expected a long unit at position {i}, got token {t}")
        if i + 1 >= len(tokens) or tokens[i + 1] != v.long_stop:
            raise ValueError(f"expected LONG_STOP after the long unit at position {i}")
        longs.append(t - v.long_offset)
        i += 2
        span = []
        while i < len(tokens) and tokens[i] != v.short_stop:
            if not 0 <= tokens[i] < v.short:
                raise ValueError(f"expected a short unit or SHORT_STOP at position {i}, got {tokens[i]}")
            span.append(int(tokens[i]))
            i += 1
        if i >= len(tokens):
            raise ValueError("sequence ends without SHORT_STOP")
        spans.append(span)
        i += 1
    return longs, spans


NextLogits = Callable[[list[int]], torch.Tensor]


def greedy_short_units(
    next_logits: NextLogits,
    long_units: Sequence[int],
    vocab: InterleavedVocab | None = None,
    stop: float = 0.5,
    end_stop: float = 0.9,
    max_per_syllable: int = 20,
) -> list[list[int]]:
    """Greedy (top-1) decoding of the short units of each syllable given the syllable sequence.

    ``next_logits(tokens)`` returns the joint-vocabulary logits of the next token. Logits are restricted to short
    tokens and SHORT_STOP. A running continue-probability ``c *= 1 - p(SHORT_STOP)`` ends a span when it falls below
    ``stop`` (``end_stop`` after the last syllable); ``max_per_syllable`` is the length guard.
    """
    v = vocab or InterleavedVocab()
    tokens: list[int] = []
    spans: list[list[int]] = []
    for i, u in enumerate(long_units):
        tokens += [v.long_offset + int(u), v.long_stop]
        threshold = end_stop if i == len(long_units) - 1 else stop
        cont, span = 1.0, []
        while len(span) < max_per_syllable:
            logits = next_logits(tokens)[: v.short + 1].float()
            probs = torch.softmax(logits, -1)
            cont *= 1.0 - float(probs[v.short_stop])
            if cont < threshold:
                break
            nxt = int(torch.argmax(logits[: v.short]))
            span.append(nxt)
            tokens.append(nxt)
        tokens.append(v.short_stop)
        spans.append(span)
    return spans


class Vocoder(Protocol):
    """Unit-to-waveform interface (e.g. CodeHiFiGAN for mHuBERT-25 Hz units with duration prediction)."""

    sample_rate: int

    def __call__(self, units: torch.Tensor, durations: torch.Tensor | None = None) -> torch.Tensor: ...
