"""Reference syllables from phone alignments (e.g. Montreal Forced Aligner TextGrids of LibriSpeech).

Each word's phones are split into syllables by the maximal onset principle: every vowel is a nucleus; of the
consonants between two nuclei, the longest run that ends the cluster and is a legal English onset starts the next
syllable, the rest close the previous one. Word-initial consonants join the first syllable, word-final ones the last;
syllables never cross a word boundary. A syllable spans from its first phone's start to its last phone's end.

Phones may be ARPAbet (MFA ``english_us_arpa``: ``AH0``, ``T``, ``S``; vowels carry a stress digit) or IPA (MFA
``english_mfa``: ``ə``, ``tʰ``, ``aj``); IPA consonants are mapped to ARPAbet for the onset table, diacritics such
as aspiration and length are ignored. A word without a vowel (a clitic such as "'s", or a spoken-noise token) is one
syllable. Silence and noise intervals (``""``, ``sil``, ``sp``, ``spn``, ``<eps>``) are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .loaders import read_textgrid

__all__ = ["ENGLISH_ONSETS", "is_vowel", "syllabify", "syllables_from_alignment", "syllables_from_textgrid"]

SILENCE = frozenset({"", "sil", "sp", "spn", "<eps>", "<unk>", "sil0"})

ARPABET_VOWELS = frozenset(
    "AA AE AH AO AW AX AXR AY EH ER EY IH IX IY OW OY UH UW UX".split()
)  # stress digits are stripped first
_IPA_VOWEL_CHARS = set("aeiouyæɑɒɔəɚɛɜɝɪʊʌʉɨøœɐɵɯɤ")
_SYLLABIC = "\u0329"  # combining vertical line below: a syllabic consonant (m̩, n̩, l̩) is a nucleus

# legal English onsets (ARPAbet), after the usual textbook table: every single consonant but NG, the obstruent +
# liquid/glide clusters, s + stop/nasal/liquid/glide, and s + stop + liquid/glide
_SINGLE = "P B T D K G F V TH DH S Z SH ZH HH CH JH M N L R W Y".split()
_PAIRS = (
    "P R,P L,B R,B L,T R,D R,K R,K L,G R,G L,F R,F L,TH R,SH R,V R,"
    "T W,D W,K W,G W,TH W,S W,HH W,"
    "P Y,B Y,K Y,G Y,M Y,F Y,V Y,HH Y,N Y,"
    "S P,S T,S K,S M,S N,S L,S F"
)
_TRIPLES = "S P R,S P L,S T R,S K R,S K W,S K L,S P Y,S K Y,S T Y"
ENGLISH_ONSETS = frozenset(
    [(c,) for c in _SINGLE]
    + [tuple(p.split()) for p in _PAIRS.split(",")]
    + [tuple(p.split()) for p in _TRIPLES.split(",")]
)

_IPA_TO_ARPA = {
    "p": "P", "b": "B", "t": "T", "d": "D", "k": "K", "g": "G", "ɡ": "G", "c": "K", "ɟ": "G", "f": "F", "v": "V",
    "θ": "TH", "ð": "DH", "s": "S", "z": "Z", "ʃ": "SH", "ʒ": "ZH", "h": "HH", "tʃ": "CH", "dʒ": "JH", "m": "M",
    "n": "N", "ŋ": "NG", "l": "L", "ɫ": "L", "ʎ": "L", "ɹ": "R", "r": "R", "w": "W", "j": "Y", "ɾ": "T", "ʔ": "T",
    "ç": "HH", "ɲ": "N",
}  # fmt: skip
_IPA_DIACRITICS = "ʰʷʲːˑ̃̚"


def _strip_stress(phone: str) -> str:
    return phone.rstrip("012")


def is_vowel(phone: str) -> bool:
    """ARPAbet vowel (any stress), IPA vowel or diphthong, or an IPA syllabic consonant."""
    p = phone.strip()
    if _strip_stress(p).upper() in ARPABET_VOWELS and (p.isupper() or p[-1:].isdigit()):
        return True
    return _SYLLABIC in p or any(ch in _IPA_VOWEL_CHARS for ch in p)


def _onset_symbol(phone: str) -> str:
    p = _strip_stress(phone.strip())
    if p.isupper():
        return p
    base = "".join(ch for ch in p if ch not in _IPA_DIACRITICS)
    return _IPA_TO_ARPA.get(base, base)


def _legal_onset(cluster: Sequence[str]) -> bool:
    return tuple(_onset_symbol(p) for p in cluster) in ENGLISH_ONSETS


def syllabify(phones: Sequence[str]) -> list[list[int]]:
    """Indices of ``phones`` (one word, silences removed) grouped into syllables by maximal onset."""
    phones = list(phones)
    if not phones:
        return []
    nuclei = [i for i, p in enumerate(phones) if is_vowel(p)]
    if not nuclei:
        return [list(range(len(phones)))]
    starts = [0]
    for a, b in zip(nuclei, nuclei[1:]):
        cons = list(range(a + 1, b))
        split = b  # no consonants, or none that starts a legal onset: the next syllable starts at its vowel
        for k in range(len(cons)):  # the longest legal onset first
            if _legal_onset([phones[i] for i in cons[k:]]):
                split = cons[k]
                break
        starts.append(split)
    bounds = starts + [len(phones)]
    return [list(range(s, e)) for s, e in zip(bounds[:-1], bounds[1:])]


def syllables_from_alignment(
    phones: Sequence[tuple[float, float, str]], words: Sequence[tuple[float, float, str]] | None = None
) -> list[tuple[float, float, str]]:
    """Syllables ``(start, end, "P1 P2 ...")`` from phone intervals, split per word when ``words`` is given.

    A phone belongs to the word interval that contains its midpoint; without ``words`` the phones between two
    silences form one word.
    """
    phs = []
    for s, e, lab in phones:
        if not e >= s:
            raise ValueError(f"phone interval {lab!r} ends ({e}) before it starts ({s})")
        phs.append((float(s), float(e), lab.strip()))
    phs.sort(key=lambda x: x[0])
    groups: list[list[tuple[float, float, str]]] = []
    if words is None:
        cur: list = []
        for ph in phs:
            if ph[2].lower() in SILENCE:
                if cur:
                    groups.append(cur)
                cur = []
            else:
                cur.append(ph)
        if cur:
            groups.append(cur)
    else:
        spans = sorted((float(s), float(e)) for s, e, w in words if w.strip().lower() not in SILENCE)
        buckets: list[list] = [[] for _ in spans]
        for ph in phs:
            if ph[2].lower() in SILENCE:
                continue
            mid = (ph[0] + ph[1]) / 2
            for j, (s, e) in enumerate(spans):
                if s <= mid <= e:
                    buckets[j].append(ph)
                    break
            else:
                raise ValueError(f"phone {ph[2]!r} at {ph[0]:.3f}-{ph[1]:.3f} s lies in no word interval")
        groups = [b for b in buckets if b]
    out = []
    for g in groups:
        for idx in syllabify([p[2] for p in g]):
            out.append((g[idx[0]][0], g[idx[-1]][1], " ".join(g[i][2] for i in idx)))
    return out


def syllables_from_textgrid(
    path: str | Path, phone_tier: str = "phones", word_tier: str | None = "words"
) -> list[tuple[float, float, str]]:
    """Syllables of an aligned TextGrid (MFA writes tiers ``words`` and ``phones``; ``word_tier=None`` splits at
    silences instead)."""
    tiers = read_textgrid(path)
    if phone_tier not in tiers:
        raise ValueError(f"{path}: no interval tier {phone_tier!r} (tiers: {sorted(tiers)})")
    if word_tier is not None and word_tier not in tiers:
        raise ValueError(f"{path}: no interval tier {word_tier!r} (tiers: {sorted(tiers)}); pass word_tier=None")
    return syllables_from_alignment(tiers[phone_tier], tiers[word_tier] if word_tier is not None else None)
