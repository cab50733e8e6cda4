"""Synthetic corpus ground truth, TextGrid and LibriSpeech-folder loaders on generated files."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.io import wavfile

from iclr25.syllablelm.data.loaders import iter_librispeech, load_audio, read_textgrid, write_textgrid
from iclr25.syllablelm.data.synth import make_corpus, split_syllable, synthesize_words

pytest.importorskip("espeakng_loader")


def test_synthesized_syllables_are_exact_and_deterministic():
    utt = synthesize_words([("ka:", "mi:n"), ("soU",)], rate=170)
    assert [s for _, _, s in utt.syllables] == ["ka:", "mi:n", "soU"]
    starts = [s for s, _, _ in utt.syllables]
    ends = [e for _, e, _ in utt.syllables]
    assert starts == sorted(starts) and ends[:-1] == starts[1:]
    assert 0 <= starts[0] and ends[-1] <= utt.duration
    assert all(0.04 < e - s < 0.6 for s, e, _ in utt.syllables)
    # espeak-ng timing is reproducible only to a few milliseconds between calls
    again = synthesize_words([("ka:", "mi:n"), ("soU",)], rate=170)
    assert abs(len(again.wav) - len(utt.wav)) <= 0.02 * 16000
    assert np.allclose([s for s, _, _ in again.syllables], starts, atol=0.02)
    # the audio before the first onset is (near) silent, the syllables hold the energy
    s0, e1 = int(starts[0] * 16000), int(ends[-1] * 16000)
    assert np.abs(utt.wav[s0:e1]).mean() > 5 * np.abs(utt.wav[: max(s0, 1)]).mean()
    assert split_syllable("ka:n") == ("k", "a:", "n")
    with pytest.raises(ValueError):
        split_syllable("xyz")


def test_corpus_seeded():
    a = make_corpus(3, seed=5)
    b = make_corpus(3, seed=5)
    assert [[s for _, _, s in u.syllables] for u in a] == [[s for _, _, s in u.syllables] for u in b]
    for u, v in zip(a, b):
        assert np.allclose([s for s, _, _ in u.syllables], [s for s, _, _ in v.syllables], atol=0.02)


def test_textgrid_round_trip(tmp_path):
    sylls = [(0.1, 0.25, "ka:"), (0.25, 0.5, 'mi"n'), (0.7, 0.9, "soU")]
    path = tmp_path / "a.TextGrid"
    write_textgrid(path, {"syllables": sylls, "words": [(0.1, 0.5, "kami")]}, xmax=1.0)
    tiers = read_textgrid(path)
    got = [iv for iv in tiers["syllables"] if iv[2]]
    assert got == sylls
    assert tiers["syllables"][0] == (0.0, 0.1, "") and tiers["words"] == [
        (0.0, 0.1, ""),
        (0.1, 0.5, "kami"),
        (0.5, 1.0, ""),
    ]


def test_textgrid_short_format(tmp_path):
    short = 'File type = "ooTextFile"\nObject class = "TextGrid"\n\n0\n1.5\n<exists>\n1\n"IntervalTier"\n"syl"\n0\n1.5\n2\n0\n0.7\n"ba"\n0.7\n1.5\n""\n'
    path = tmp_path / "s.TextGrid"
    path.write_text(short)
    assert read_textgrid(path) == {"syl": [(0.0, 0.7, "ba"), (0.7, 1.5, "")]}
    path.write_text("not a textgrid")
    with pytest.raises(ValueError):
        read_textgrid(path)


def test_librispeech_folder(tmp_path):
    d = tmp_path / "19" / "198"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(2):
        wavfile.write(d / f"19-198-000{i}.wav", 8000, (rng.normal(size=8000) * 1000).astype(np.int16))
    (d / "19-198.trans.txt").write_text("19-198-0000 HELLO WORLD\n19-198-0001 GOOD BYE\n")
    items = list(iter_librispeech(tmp_path, ext=".wav"))
    assert [(u, t) for u, _, t in items] == [("19-198-0000", "HELLO WORLD"), ("19-198-0001", "GOOD BYE")]
    x = load_audio(items[0][1])
    assert x.dtype == np.float32 and len(x) == 16000 and np.abs(x).max() < 1.0
    (d / "19-198.trans.txt").write_text("19-198-0009 MISSING\n")
    with pytest.raises(FileNotFoundError):
        list(iter_librispeech(tmp_path, ext=".wav"))


def _silent_run_start(wav: np.ndarray, end: int, sample_rate: int) -> int:
    """Independent oracle: start of the longest run of near-zero samples (|x| < 1e-3) in the 120 ms before ``end``."""
    lo = max(0, end - int(0.12 * sample_rate))
    quiet = np.abs(wav[lo:end]) < 1e-3
    best, best_start, run_start = 0, end, None
    for i, q in enumerate(np.append(quiet, False)):
        if q and run_start is None:
            run_start = i
        elif not q and run_start is not None:
            if i - run_start > best:
                best, best_start = i - run_start, lo + run_start
            run_start = None
    return best_start


def test_stop_onsets_start_at_the_closure():
    """p/t/k: espeak's event is the release; the syllable boundary must sit at the closure onset (within 10 ms)."""
    words = [("ka:", "pa:", "ti:"), ("moU", "kEn"), ("su:", "ta:")]
    utt = synthesize_words(words, rate=170)
    sr = utt.sample_rate
    releases = [t for t, p in utt.phones if not p.startswith("_")]
    phon = [p for t, p in utt.phones if not p.startswith("_")]
    onset_idx, k = [], 0
    for w in words:
        for syl in w:
            onset_idx.append(k)
            k += len(split_syllable(syl))
    checked = 0
    for j, i in enumerate(onset_idx):
        if j == 0 or phon[i] not in ("p", "t", "k"):
            continue
        release = releases[i]
        closure = _silent_run_start(utt.wav, int(round(release * sr)), sr) / sr
        assert release - closure > 0.02  # a real closure: the release event is well after it
        start = utt.syllables[j][0]
        assert abs(start - closure) <= 0.010, (phon[i], start, closure, release)
        assert utt.syllables[j - 1][1] == start
        checked += 1
    assert checked == 4  # pa:, ti:, kEn, ta:
