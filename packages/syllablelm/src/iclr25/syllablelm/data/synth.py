"""A synthetic speech corpus with exact syllable boundaries.

Speech is produced by espeak-ng from a CV pseudo-language written in espeak phoneme mnemonics, so the syllables are
known by construction and their times come from espeak's phoneme events (exact sample offsets). Each syllable spans
from its onset to the next syllable's onset (the last one to the start of the final pause). Audio is resampled from
22050 Hz to 16 kHz.

espeak-ng's event for a voiceless stop (p, t, k) marks the *release*; the ~40-50 ms closure before it is digital
silence that the event timing files under the previous phoneme. A syllable whose onset is a stop therefore starts at
the closure onset: the start of the silent run (``closure_onset``) that ends at the release event. Voiced stops carry
a voice bar and their event already marks the closure, so they are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.signal import resample_poly

from .espeak import Espeak

CONSONANTS = ("p", "t", "k", "b", "d", "g", "m", "n", "s", "l", "r", "f", "v", "z")
VOWELS = ("a:", "i:", "u:", "eI", "oU", "a", "E", "I", "0", "V")
CODAS = ("n", "m", "s", "t", "k", "l")
STOPS = frozenset("ptkbdg")
CLOSURE_MIN_S = 0.01  # a silent run shorter than 10 ms before a release is not taken as a closure
CLOSURE_LEVEL = 0.01  # "silent": the 1 ms peak envelope stays below 1 % of the utterance's peak
# CV syllables with long and short vowels, and CVC syllables: durations vary from ~80 to ~300 ms
SYLLABLES = tuple(c + v for c in CONSONANTS for v in VOWELS) + tuple(
    c + v + k for c in CONSONANTS for v in VOWELS[:5] for k in CODAS
)
VOICES = ("en", "en-us")


def _norm(phoneme: str) -> str:
    """espeak shortens unstressed long vowels ('a:' -> 'a') and flaps t ('t#'): compare without those marks."""
    return phoneme.replace(":", "").replace("#", "")


def split_syllable(syl: str) -> tuple[str, ...]:
    """'ka:' -> ('k', 'a:'); 'ka:n' -> ('k', 'a:', 'n')."""
    for c in CONSONANTS:
        if not syl.startswith(c):
            continue
        rest = syl[len(c) :]
        for v in sorted(VOWELS, key=len, reverse=True):
            if rest == v:
                return c, v
            if rest.startswith(v) and rest[len(v) :] in CODAS:
                return c, v, rest[len(v) :]
    raise ValueError(f"{syl!r} is not a CV or CVC syllable of the pseudo-language")


def closure_onset(wav: np.ndarray, release: int, floor: int) -> int:
    """Start of the silent run that ends at sample ``release`` (a stop's release), searched back to ``floor``.

    Silent: ``|wav|`` below ``CLOSURE_LEVEL`` times the utterance's peak. The onset is one past the last louder sample
    in ``[floor, release)`` (``floor`` when all of it is silent).
    """
    x = np.abs(np.asarray(wav, dtype=np.float64))
    if not 0 <= floor <= release <= len(x):
        raise ValueError(f"need 0 <= floor <= release <= {len(x)}, got floor={floor}, release={release}")
    if release == floor or x.max() <= 0:
        return release
    loud = np.nonzero(x[floor:release] >= CLOSURE_LEVEL * x.max())[0]
    return floor + (int(loud[-1]) + 1 if len(loud) else 0)


class PhonemeMismatch(RuntimeError):
    """espeak-ng did not realise the requested phonemes one to one."""


@dataclass
class Utterance:
    """One synthesized utterance: 16 kHz float32 waveform and syllables ``(start_s, end_s, label)``."""

    wav: np.ndarray
    sample_rate: int
    syllables: list[tuple[float, float, str]]
    words: list[tuple[str, ...]] = field(default_factory=list)
    phones: list[tuple[float, str]] = field(default_factory=list)  # espeak's phoneme events (time_s, phoneme)

    @property
    def duration(self) -> float:
        return len(self.wav) / self.sample_rate

    @property
    def boundaries(self) -> np.ndarray:
        """Sorted unique syllable boundary times in seconds (starts and ends)."""
        pts = [s for s, _, _ in self.syllables] + [e for _, e, _ in self.syllables]
        return np.unique(np.round(np.asarray(pts, dtype=np.float64), 6))


def synthesize_words(
    words: list[tuple[str, ...]], voice: str = "en", rate: int = 175, pitch: int = 50, sample_rate: int = 16000
) -> Utterance:
    """Speak a list of words (each a tuple of CV syllables) and return the utterance with syllable times."""
    if not words or not all(words):
        raise ValueError("words must be a non-empty list of non-empty syllable tuples")
    expected: list[tuple[int, str]] = []  # (syllable index, phoneme)
    sylls: list[str] = []
    first: list[int] = []  # index of each syllable's onset in the phoneme sequence
    for w in words:
        for syl in w:
            first.append(len(expected))
            expected += [(len(sylls), p) for p in split_syllable(syl)]
            sylls.append(syl)
    text = " ".join("[[" + "".join(w) + "]]" for w in words)
    wav16, events, sr = Espeak.synthesize(text, voice=voice, rate=rate, pitch=pitch)
    phones = [e for e in events if not e.phoneme.startswith("_")]
    pauses = [e.sample for e in events if e.phoneme.startswith("_")]
    got = [_norm(e.phoneme) for e in phones]
    if got != [_norm(p) for _, p in expected]:
        raise PhonemeMismatch(f"espeak-ng changed the phonemes: expected {[p for _, p in expected]}, got {got}")
    starts = []
    for j, i in enumerate(first):
        s = phones[i].sample
        if j > 0 and expected[i][1] in STOPS:  # move a stop onset back from its release to its closure
            c = closure_onset(wav16, s, phones[i - 1].sample)
            s = c if s - c >= CLOSURE_MIN_S * sr else s
        starts.append(s)
    last_end = min([p for p in pauses if p > phones[-1].sample], default=len(wav16))
    ends = starts[1:] + [last_end]
    wav = resample_poly(wav16.astype(np.float32) / 32768.0, sample_rate, sr).astype(np.float32)
    syllables = [(s / sr, e / sr, lab) for s, e, lab in zip(starts, ends, sylls)]
    phone_times = [(e.sample / sr, e.phoneme) for e in phones]
    return Utterance(wav=wav, sample_rate=sample_rate, syllables=syllables, words=list(words), phones=phone_times)


def random_word(rng: np.random.Generator, n_syll: tuple[int, int] = (1, 3)) -> tuple[str, ...]:
    k = int(rng.integers(n_syll[0], n_syll[1] + 1))
    return tuple(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), size=k))


def make_lexicon(n_words: int, seed: int = 0, n_syll: tuple[int, int] = (1, 3)) -> list[tuple[str, ...]]:
    """A lexicon of distinct random pseudo-words."""
    rng = np.random.default_rng(seed)
    lex: list[tuple[str, ...]] = []
    seen = set()
    while len(lex) < n_words:
        w = random_word(rng, n_syll)
        if w not in seen:
            seen.add(w)
            lex.append(w)
    return lex


def make_corpus(
    n_utterances: int,
    seed: int = 0,
    words_per_utterance: tuple[int, int] = (3, 6),
    lexicon: list[tuple[str, ...]] | None = None,
    rate_range: tuple[int, int] = (150, 200),
    pitch_range: tuple[int, int] = (35, 65),
) -> list[Utterance]:
    """``n_utterances`` random sentences over a lexicon (default: 200 pseudo-words), with random voice/rate/pitch.

    Sentences espeak-ng does not realise phoneme for phoneme (it sometimes reduces a vowel) are redrawn."""
    if n_utterances < 0:
        raise ValueError(f"n_utterances must be >= 0, got {n_utterances}")
    rng = np.random.default_rng(seed)
    lex = lexicon if lexicon is not None else make_lexicon(200, seed=1234)
    out: list[Utterance] = []
    failures = 0
    while len(out) < n_utterances:
        nw = int(rng.integers(words_per_utterance[0], words_per_utterance[1] + 1))
        words = [lex[i] for i in rng.integers(0, len(lex), size=nw)]
        try:
            out.append(
                synthesize_words(
                    words,
                    voice=VOICES[int(rng.integers(0, len(VOICES)))],
                    rate=int(rng.integers(rate_range[0], rate_range[1] + 1)),
                    pitch=int(rng.integers(pitch_range[0], pitch_range[1] + 1)),
                )
            )
        except PhonemeMismatch:
            failures += 1  # espeak rewrote a phoneme: draw another sentence (deterministic given the seed)
            if failures > 10 * (n_utterances + 1):
                raise
    return out
