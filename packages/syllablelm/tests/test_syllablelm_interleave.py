"""Interleaving round trip, a hand-built layout, the greedy stop rules; official-format LM loading."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.syllablelm.interleaving import (
    InterleavedVocab,
    dedup_with_durations,
    deinterleave,
    greedy_short_units,
    interleave,
)
from iclr25.syllablelm.lm import SyllableLM, SyllableLMConfig
from iclr25.syllablelm.loaders import lm_state_to_fairseq, load_fairseq_lm, load_official_units

V = InterleavedVocab(short=10, long=6)  # SHORT_STOP 10, long offset 11, LONG_STOP 17


def test_hand_built_layout():
    # short units at 25 Hz: durations 2,3,1,4 -> 50 Hz spans [0,4) [4,10) [10,12) [12,20), midpoints 2, 7, 11, 16
    # syllables start at 0 and 14 (50 Hz): with lookahead 5 the first span takes midpoints <= 9 -> units 3, 7
    tokens, durs = interleave([3, 7, 7 - 5, 9], [2, 3, 1, 4], [4, 1], [0, 14], vocab=V, lookahead=5)
    assert tokens == [15, 17, 3, 7, 10, 12, 17, 2, 9, 10]
    assert durs == [2, 3, 1, 4]


def test_round_trip():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 10, 60)
    short, dur = dedup_with_durations(frames)
    longs = rng.integers(0, 6, 7).tolist()
    starts = sorted(rng.choice(np.arange(1, 110), 6, replace=False).tolist())
    tokens, durs = interleave(short, dur, longs, [0] + starts, vocab=V)
    got_long, spans = deinterleave(tokens, vocab=V)
    assert got_long == longs
    assert sum(spans, []) == short
    assert durs == dur
    assert np.repeat(short, dur).tolist() == frames.tolist()


def test_deinterleave_rejects_malformed():
    with pytest.raises(ValueError):
        deinterleave([3, 10], vocab=V)
    with pytest.raises(ValueError):
        deinterleave([12, 17, 3], vocab=V)


def test_greedy_stop_rules():
    # p(SHORT_STOP) = 0.3 every step: continue prob 0.7, 0.49 -> one unit per middle span (stop at < 0.5),
    # and at the last syllable the running product falls below 0.9 at once -> no unit
    logits = torch.full((V.size,), -30.0)
    logits[4] = 0.0
    logits[V.short_stop] = float(np.log(0.3 / 0.7))
    calls = []

    def next_logits(tokens):
        calls.append(list(tokens))
        return logits

    spans = greedy_short_units(next_logits, [1, 2, 3], vocab=V)
    assert spans == [[4], [4], []]
    assert calls[1] == [12, 17, 4]  # the emitted unit is fed back
    # never stopping: the length guard ends each span
    logits2 = torch.full((V.size,), -30.0)
    logits2[5] = 0.0
    assert greedy_short_units(lambda t: logits2, [0], vocab=V, max_per_syllable=4) == [[5, 5, 5, 5]]


def test_fairseq_lm_round_trip(tmp_path):
    torch.manual_seed(0)
    cfg = SyllableLMConfig(vocab=13, depth=2, heads=2, dim=8, dropout=0.0, max_pos=40)
    model = SyllableLM(cfg).eval()
    path = tmp_path / "checkpoint_best.pt"
    torch.save({"model": lm_state_to_fairseq(model), "cfg": {"model": {"num_heads": 2}}}, path)
    loaded = load_fairseq_lm(path)
    assert loaded.config.vocab == 13 and loaded.config.depth == 2 and loaded.config.max_pos == 40
    x = torch.tensor([[13, 1, 2, 3]])
    torch.testing.assert_close(loaded(x)[0], model(x)[0])
    bad = lm_state_to_fairseq(model)
    bad["encoder.blocks.0.attn.proj.weight"] = torch.zeros(8, 9)
    torch.save({"model": bad}, path)
    with pytest.raises(ValueError):
        load_fairseq_lm(path)


def test_official_units_loader(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "km.npy", rng.normal(size=(6, 4)).astype(np.float32))
    np.save(tmp_path / "agg.npy", np.array([0, 0, 1, 1, 2, 2]))
    tok = load_official_units(lambda w: torch.randn(30, 4), tmp_path / "km.npy", tmp_path / "agg.npy")
    assert tok.vocab_size == 3
    np.save(tmp_path / "agg.npy", np.array([0, 1]))
    with pytest.raises(ValueError):
        load_official_units(lambda w: None, tmp_path / "km.npy", tmp_path / "agg.npy")
