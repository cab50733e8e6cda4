"""Loaders for real corpora: LibriSpeech-style folders and Praat TextGrid alignments (syllable/word tiers).

- ``iter_librispeech(root)``: ``<root>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt`` + audio files
  (``.flac`` needs the optional ``soundfile`` package; ``.wav`` is read with scipy).
- ``read_textgrid(path)``: interval tiers of a TextGrid in the long (ooTextFile) or short format.
- ``write_textgrid(path, tiers, xmax)``: long-format writer (atomic), e.g. to export synthetic syllable alignments.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from iclr25.shared import atomic_write

__all__ = ["iter_librispeech", "load_audio", "read_textgrid", "write_textgrid"]


def load_audio(path: str | Path, sample_rate: int = 16000) -> np.ndarray:
    """Mono float32 waveform at ``sample_rate`` (resampled when needed)."""
    path = Path(path)
    if path.suffix.lower() == ".flac":
        try:
            import soundfile
        except ImportError as err:
            raise RuntimeError("reading .flac needs the soundfile package (pip install soundfile)") from err
        x, sr = soundfile.read(str(path), dtype="float32")
    elif path.suffix.lower() == ".wav":
        from scipy.io import wavfile

        sr, x = wavfile.read(str(path))
        if x.dtype == np.uint8:  # 8-bit WAV PCM is unsigned, centred on 128
            x = (x.astype(np.float32) - 128.0) / 128.0
        elif np.issubdtype(x.dtype, np.integer):  # int16 / int32 (24-bit files are read as left-aligned int32)
            x = x.astype(np.float32) / float(np.iinfo(x.dtype).max + 1)
        x = x.astype(np.float32)
    else:
        raise ValueError(f"unsupported audio format {path.suffix!r} (expected .wav or .flac)")
    if x.ndim == 2:
        x = x.mean(1)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{path}: the audio holds NaN or infinite samples")
    if sr != sample_rate:
        from scipy.signal import resample_poly

        g = np.gcd(int(sr), sample_rate)
        x = resample_poly(x, sample_rate // g, int(sr) // g).astype(np.float32)
    return x


def iter_librispeech(root: str | Path, ext: str = ".flac") -> Iterator[tuple[str, Path, str]]:
    """Yield ``(utterance_id, audio_path, transcript)`` for every line of every ``*.trans.txt`` under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    for trans in sorted(root.rglob("*.trans.txt")):
        for line in trans.read_text().splitlines():
            if not line.strip():
                continue
            uid, _, text = line.partition(" ")
            audio = trans.parent / f"{uid}{ext}"
            if not audio.exists():
                raise FileNotFoundError(f"{trans}: listed utterance {uid} has no {audio.name}")
            yield uid, audio, text.strip()


def _tokens(text: str) -> list[tuple[str, bool]]:
    """Quoted strings (with "" escapes) and bare words/numbers, flagged by whether they were quoted."""
    out = []
    for m in re.finditer(r'"((?:[^"]|"")*)"|\[\s*\d*\s*\]|([^\s"=\[\]:]+)', text):
        if m.group(1) is not None:
            out.append((m.group(1).replace('""', '"'), True))
        elif m.group(2) is not None:
            out.append((m.group(2), False))  # bracketed indices such as "item [1]" are skipped
    return out


def read_textgrid(path: str | Path) -> dict[str, list[tuple[float, float, str]]]:
    """Interval tiers ``{name: [(xmin, xmax, text), ...]}`` (empty-text intervals kept). Point tiers are skipped."""
    text = Path(path).read_text(encoding="utf-8-sig")
    # drop the long format's (unquoted) keys so both formats become the same value stream
    keys = {
        "File",
        "type",
        "Object",
        "class",
        "xmin",
        "xmax",
        "tiers?",
        "size",
        "item",
        "name",
        "intervals",
        "points",
        "text",
        "number",
        "mark",
        "<exists>",
    }
    vals = [t for t, quoted in _tokens(text) if quoted or t not in keys]
    if len(vals) < 2 or vals[0] != "ooTextFile" or vals[1] != "TextGrid":
        raise ValueError(f"{path}: not a TextGrid (header {vals[:2]})")
    vals = vals[2:]
    pos = 0

    def take(what: str) -> str:
        nonlocal pos
        if pos >= len(vals):
            raise ValueError(f"{path}: TextGrid ends early (truncated?) while reading {what}")
        pos += 1
        return vals[pos - 1]

    def number(what: str) -> float:
        tok = take(what)
        try:
            v = float(tok)
        except ValueError:
            raise ValueError(f"{path}: expected a number for {what}, got {tok!r}") from None
        if not np.isfinite(v):
            raise ValueError(f"{path}: {what} is {tok!r}, expected a finite time")
        return v

    def count(what: str) -> int:
        v = number(what)
        if v != int(v) or v < 0:
            raise ValueError(f"{path}: {what} must be a non-negative integer, got {v}")
        return int(v)

    fmin, fmax = number("the file xmin"), number("the file xmax")
    if fmax < fmin:
        raise ValueError(f"{path}: file xmax {fmax} is before xmin {fmin}")
    n_tiers = count("the number of tiers")
    tiers: dict[str, list[tuple[float, float, str]]] = {}
    for ti in range(n_tiers):
        cls, name = take(f"the class of tier {ti + 1}"), take(f"the name of tier {ti + 1}")
        number(f"tier {name!r} xmin"), number(f"tier {name!r} xmax")
        n = count(f"the size of tier {name!r}")
        if cls == "IntervalTier":
            ivs = []
            for k in range(n):
                where = f"interval {k + 1} of tier {name!r}"
                s, e, lab = number(f"{where} xmin"), number(f"{where} xmax"), take(f"{where} text")
                if e < s:
                    raise ValueError(f"{path}: {where} ends ({e}) before it starts ({s})")
                if ivs and s < ivs[-1][1] - 1e-9:
                    raise ValueError(f"{path}: {where} starts at {s}, before the previous one ends ({ivs[-1][1]})")
                ivs.append((s, e, lab))
            tiers[name] = ivs
        elif cls == "TextTier":
            for k in range(n):
                number(f"point {k + 1} of tier {name!r}"), take(f"the mark of point {k + 1} of tier {name!r}")
        else:
            raise ValueError(f"{path}: unknown tier class {cls!r} (expected IntervalTier or TextTier)")
    if pos != len(vals):
        raise ValueError(f"{path}: {len(vals) - pos} unexpected values after the last of the {n_tiers} tiers")
    return tiers


def write_textgrid(path: str | Path, tiers: dict[str, list[tuple[float, float, str]]], xmax: float) -> None:
    """Write interval tiers in the long TextGrid format, filling gaps with empty intervals."""
    lines = [
        'File type = "ooTextFile"',
        'Object class = "TextGrid"',
        "",
        "xmin = 0",
        f"xmax = {xmax}",
        "tiers? <exists>",
        f"size = {len(tiers)}",
        "item []:",
    ]
    for i, (name, ivs) in enumerate(tiers.items(), 1):
        filled, t = [], 0.0
        for s, e, lab in sorted(ivs):
            if s > t + 1e-9:
                filled.append((t, s, ""))
            filled.append((s, e, lab))
            t = e
        if t < xmax - 1e-9:
            filled.append((t, xmax, ""))
        lines += [
            f"    item [{i}]:",
            '        class = "IntervalTier"',
            f'        name = "{name}"',
            "        xmin = 0",
            f"        xmax = {xmax}",
            f"        intervals: size = {len(filled)}",
        ]
        for j, (s, e, lab) in enumerate(filled, 1):
            lab = lab.replace('"', '""')
            lines += [
                f"        intervals [{j}]:",
                f"            xmin = {s}",
                f"            xmax = {e}",
                f'            text = "{lab}"',
            ]
    with atomic_write(path, "w") as f:
        f.write("\n".join(lines) + "\n")
