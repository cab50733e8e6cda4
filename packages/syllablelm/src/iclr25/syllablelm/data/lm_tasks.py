"""Offline sWUGGY-like and sBLIMP-like pairs in the pseudo-language of ``synth.py``.

Grammar: ``DET_c NOUN VERB-SUF_c`` where the determiner and the verb suffix agree in class ``c`` (A or B).
- sBLIMP-like pair: a grammatical sentence vs the same sentence with the other class's suffix.
- sWUGGY-like pair: a lexicon word spoken alone vs a nonword made by replacing one of its syllables with another
  syllable of the language (phonotactically valid, not in the lexicon).
"""

from __future__ import annotations

import numpy as np

from .synth import SYLLABLES, make_lexicon

DETS = {"A": ("ka:",), "B": ("moU",)}
SUFFIX = {"A": "li:", "B": "tu:"}


class PseudoLanguage:
    def __init__(self, n_nouns: int = 24, n_verbs: int = 12, seed: int = 0):
        reserved = {s for d in DETS.values() for s in d} | set(SUFFIX.values())
        lex = [w for w in make_lexicon(3 * (n_nouns + n_verbs), seed=seed, n_syll=(2, 2)) if not set(w) & reserved]
        if len(lex) < n_nouns + n_verbs:
            raise ValueError("lexicon too small for the requested numbers of nouns and verbs")
        self.nouns = lex[:n_nouns]
        self.verbs = lex[n_nouns : n_nouns + n_verbs]
        self.words = set(self.nouns) | set(self.verbs)

    def sentence(self, rng: np.random.Generator, agree: bool = True, cls: str | None = None):
        c = cls or ("A" if rng.random() < 0.5 else "B")
        other = "B" if c == "A" else "A"
        noun = self.nouns[int(rng.integers(len(self.nouns)))]
        verb = self.verbs[int(rng.integers(len(self.verbs)))]
        return [DETS[c], noun, verb + (SUFFIX[c if agree else other],)]

    def blimp_pairs(self, n: int, seed: int = 1):
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            state = rng.bit_generator.state
            good = self.sentence(rng, True)
            rng.bit_generator.state = state
            bad = self.sentence(rng, False)
            out.append((good, bad))
        return out

    def wuggy_pairs(self, n: int, seed: int = 2):
        rng = np.random.default_rng(seed)
        out = []
        words = sorted(self.words)
        while len(out) < n:
            w = words[int(rng.integers(len(words)))]
            i = int(rng.integers(len(w)))
            s = SYLLABLES[int(rng.integers(len(SYLLABLES)))]
            nw = w[:i] + (s,) + w[i + 1 :]
            if nw not in self.words and s != w[i]:
                out.append(([w], [nw]))
        return out
