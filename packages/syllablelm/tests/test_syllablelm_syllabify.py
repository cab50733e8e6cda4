"""Maximal-onset syllabification of phone alignments, on hand-syllabified words and generated MFA-style TextGrids."""

from __future__ import annotations

import pytest

from iclr25.syllablelm import boundary_scores, write_textgrid
from iclr25.syllablelm.data.syllabify import is_vowel, syllabify, syllables_from_alignment, syllables_from_textgrid

# hand syllabification by maximal onset (dictionary splits)
CASES = [
    ("EH1 K S T R AH0", [["EH1", "K"], ["S", "T", "R", "AH0"]]),  # extra: ex.tra
    ("AE1 T L AH0 S", [["AE1", "T"], ["L", "AH0", "S"]]),  # atlas: at.las (no "tl" onset)
    ("K AE1 M ER0 AH0", [["K", "AE1"], ["M", "ER0"], ["AH0"]]),  # camera: ca.me.ra (vowel hiatus)
    ("IH0 N S P AY1 R", [["IH0", "N"], ["S", "P", "AY1", "R"]]),  # inspire: in.spire
    ("S T R EH1 NG K TH S", [["S", "T", "R", "EH1", "NG", "K", "TH", "S"]]),  # strengths: one syllable
    ("M AH1 NG K IY0", [["M", "AH1", "NG"], ["K", "IY0"]]),  # monkey: NG is never an onset
    ("EH1 K S P L OY2 T", [["EH1", "K"], ["S", "P", "L", "OY2", "T"]]),  # exploit
    ("ɛ k s t ɹ ə", [["ɛ", "k"], ["s", "t", "ɹ", "ə"]]),  # IPA (MFA english_mfa)
    ("æ tʰ l ə s", [["æ", "tʰ"], ["l", "ə", "s"]]),  # aspiration ignored for the onset table
    ("b ʌ tʰ n̩", [["b", "ʌ"], ["tʰ", "n̩"]]),  # button: syllabic n is a nucleus
    ("Z", [["Z"]]),  # a vowel-less clitic is one syllable
]


@pytest.mark.parametrize(("phones", "expected"), CASES, ids=[c[0] for c in CASES])
def test_maximal_onset(phones, expected):
    ph = phones.split()
    assert [[ph[i] for i in syl] for syl in syllabify(ph)] == expected


def test_vowels():
    assert all(is_vowel(p) for p in ["AH0", "ER1", "AY", "ə", "aj", "ow", "ɚ", "iː", "l̩"])
    assert not any(is_vowel(p) for p in ["T", "HH", "NG", "Y", "W", "tʰ", "j", "ŋ", "ɹ"])


def _alignment(words, t0=0.1, phone_dur=0.07, gap=0.15):
    """Word and phone intervals for ``words = [(word, "P1 P2 ...")]`` with silences between words."""
    w_iv, p_iv, t = [], [], t0
    for word, phones in words:
        start = t
        for p in phones.split():
            p_iv.append((round(t, 6), round(t + phone_dur, 6), p))
            t += phone_dur
        w_iv.append((round(start, 6), round(t, 6), word))
        t += gap
    return w_iv, p_iv, round(t, 6)


def test_textgrid_syllables_match_hand_syllabification(tmp_path):
    words = [("an", "AE1 N"), ("extra", "EH1 K S T R AH0"), ("camera", "K AE1 M ER0 AH0")]
    w_iv, p_iv, end = _alignment(words)
    path = tmp_path / "utt.TextGrid"
    write_textgrid(path, {"words": w_iv, "phones": p_iv}, xmax=end + 0.1)  # gaps become "" intervals
    syl = syllables_from_textgrid(path)
    assert [s[2] for s in syl] == ["AE1 N", "EH1 K", "S T R AH0", "K AE1", "M ER0", "AH0"]
    d = 0.07
    # times: an = phones 0-1; ex = 0-1 of word 2 (starts 0.1 + 2d + 0.15)
    w2 = 0.1 + 2 * d + 0.15
    assert syl[0][:2] == pytest.approx((0.1, 0.1 + 2 * d))
    assert syl[1][:2] == pytest.approx((w2, w2 + 2 * d))
    assert syl[2][:2] == pytest.approx((w2 + 2 * d, w2 + 6 * d))
    # the same syllables scored against themselves are perfect under both protocols
    b = sorted({t for s in syl for t in s[:2]})
    for protocol in ("official", "interior"):
        assert boundary_scores(b, b, protocol=protocol)["f1"] == pytest.approx(1.0)


def test_words_keep_consonants_that_maximal_onset_would_move():
    """'an ice' without pauses: by word, N stays in 'an'; split only at silences it would start 'ice' (a.nice)."""
    w_iv, p_iv, _ = _alignment([("an", "AE1 N"), ("ice", "AY1 S")], gap=0.0)
    assert [s[2] for s in syllables_from_alignment(p_iv, w_iv)] == ["AE1 N", "AY1 S"]
    assert [s[2] for s in syllables_from_alignment(p_iv)] == ["AE1", "N AY1 S"]


def test_bad_alignments_raise(tmp_path):
    with pytest.raises(ValueError, match="no word interval"):
        syllables_from_alignment([(0.0, 0.1, "AH0"), (0.5, 0.6, "T")], [(0.0, 0.2, "a")])
    with pytest.raises(ValueError, match="before it starts"):
        syllables_from_alignment([(0.3, 0.1, "AH0")])
    path = tmp_path / "x.TextGrid"
    write_textgrid(path, {"phones": [(0.0, 0.1, "AH0")]}, xmax=0.2)
    with pytest.raises(ValueError, match="no interval tier 'words'"):
        syllables_from_textgrid(path)
    assert [s[2] for s in syllables_from_textgrid(path, word_tier=None)] == ["AH0"]
