"""Units and SylBoost: pooling, k-means, Ward merge, deduplication, inner-third targets, frozen teacher."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.cluster.hierarchy import fcluster, linkage

from iclr25.syllablelm.sylboost import BertAdam, SylBoostTrainer, inner_span, segment_targets, sylboost_loss
from iclr25.syllablelm.tokenizer import SylBoostTokenizer
from iclr25.syllablelm.units import KMeans, deduplicate, pool_segments, ward_merge


def test_pool_segments_trims_and_standardizes():
    feats = torch.arange(10, dtype=torch.float32)[:, None] * torch.tensor([[1.0, 2.0, 3.0]])
    out = pool_segments(feats, [0, 5, 7, 10], standardize=False)
    torch.testing.assert_close(out[0], feats[1:4].mean(0))  # [1, 4)
    torch.testing.assert_close(out[1], feats[5:7].mean(0))  # 2 frames: no trimming, never empty
    torch.testing.assert_close(out[2], feats[8:9].mean(0))
    z = pool_segments(feats, [0, 5, 7, 10])
    torch.testing.assert_close(z.mean(-1), torch.zeros(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(z.std(-1), torch.ones(3))
    assert torch.isfinite(pool_segments(torch.zeros(3, 4), [0, 1, 3])).all()
    with pytest.raises(ValueError):
        pool_segments(feats, [0, 5, 5, 10])


def test_kmeans_recovers_blobs():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(5, 8)) * 10
    lab = rng.integers(0, 5, 400)
    x = torch.tensor(centers[lab] + rng.normal(size=(400, 8)) * 0.1, dtype=torch.float32)
    km = KMeans(5, seed=0).fit(x)
    pred = km.predict(x).numpy()
    # a bijection between true and predicted labels
    pairs = set(zip(lab.tolist(), pred.tolist()))
    assert len(pairs) == 5 and len({p for _, p in pairs}) == 5
    with pytest.raises(ValueError):
        KMeans(3).predict(x)


def test_ward_merge_agrees_with_scipy():
    rng = np.random.default_rng(1)
    c = rng.normal(size=(12, 4))
    ours = ward_merge(torch.tensor(c), 4)
    ref = fcluster(linkage(c, "ward"), t=4, criterion="maxclust")
    # same partition
    assert len({(a, b) for a, b in zip(ours, ref)}) == 4
    assert sorted(set(ours.tolist())) == [0, 1, 2, 3]


def test_deduplicate_merges_runs():
    d = deduplicate([3, 3, 5, 3, 3, 3], [0, 4, 9, 12, 15, 20], [4, 9, 12, 15, 20, 26])
    assert d.units.tolist() == [3, 5, 3]
    assert d.starts.tolist() == [0, 9, 12]
    assert d.ends.tolist() == [9, 12, 26]


def test_inner_span_official_convention():
    assert inner_span(0, 10) == (3, 7)
    assert inner_span(0, 100) == (33, 68)  # float quirk of the official code
    assert inner_span(5, 7) == (5, 7)  # L < 3: all frames


def test_segment_targets_hand_case():
    feats = torch.arange(12, dtype=torch.float32).view(12, 1)
    targets, valid = segment_targets(torch.cat([feats, torch.zeros(3, 1)])[None], [[0, 10, 12]])
    assert torch.all(targets[0, :10] == feats[3:7].mean())  # all frames of a segment share one target
    assert torch.all(targets[0, 10:12] == feats[10:12].mean())
    assert valid[0].tolist() == [True] * 12 + [False] * 3
    loss = sylboost_loss(torch.zeros_like(targets), targets, valid)
    assert float(loss) == pytest.approx(float((targets[0, :12] ** 2).mean()))


def test_bertadam_schedule():
    assert BertAdam.schedule(0.05, 0.1) == pytest.approx(0.5)
    assert BertAdam.schedule(0.55, 0.1) == pytest.approx(0.5)
    assert BertAdam.schedule(1.0, 0.1) == pytest.approx(0.0)


class TinyEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = torch.nn.Conv1d(1, 8, 320, stride=320)
        self.mix = torch.nn.Conv1d(8, 8, 5, padding=2)

    def forward(self, wav):
        return self.mix(torch.relu(self.cnn(wav[:, None]))).transpose(1, 2)


def test_sylboost_trainer_frozen_teacher_and_progress():
    torch.manual_seed(0)
    model = TinyEncoder()
    trainer = SylBoostTrainer(model, lambda m, w: m(w), total_steps=30, frozen_prefixes=("cnn",))
    trainer.optimizer.param_groups[0]["lr"] = 1e-2
    teacher_before = {k: v.clone() for k, v in trainer.teacher.state_dict().items()}
    cnn_before = model.cnn.weight.clone()
    wav = torch.randn(2, 320 * 40)
    borders = [[0, 10, 25, 40], [0, 8, 20, 33]]
    losses = [trainer.step(wav, borders) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    for k, v in trainer.teacher.state_dict().items():
        assert torch.equal(v, teacher_before[k])
    assert torch.equal(model.cnn.weight, cnn_before)


def test_tokenizer_end_to_end_on_planted_features(tmp_path):
    rng = np.random.default_rng(0)
    protos = rng.normal(size=(6, 16)) * 3

    def make(seq):
        lengths = rng.integers(6, 12, size=len(seq))
        x = np.concatenate([np.repeat(protos[s][None], k, 0) for s, k in zip(seq, lengths)])
        return torch.tensor(x + 0.1 * rng.normal(size=x.shape), dtype=torch.float32)

    data = [make(rng.integers(0, 6, 12)) for _ in range(8)]
    tok = SylBoostTokenizer.fit(
        lambda w: data[int(w[0])],
        [torch.tensor([float(i)]) for i in range(len(data))],
        n_kmeans=12,
        n_units=6,
        target_hz=5.0,
    )
    assert tok.vocab_size == 6
    units = tok.encode(torch.tensor([0.0]))
    assert len(units) > 0 and units.starts[0] == 0 and units.ends[-1] == data[0].shape[0]
    assert (units.units[1:] != units.units[:-1]).all()
    path = tmp_path / "tok.npz"
    tok.save(path)
    again = SylBoostTokenizer.load(path, tok.encoder)
    assert again.encode(torch.tensor([0.0])).units.tolist() == units.units.tolist()
    # batched tokenization (one padded DP, one assignment) == one utterance at a time, ragged lengths included
    wavs = [torch.tensor([float(i)]) for i in (3, 0, 5, 1)]
    for dedup in (True, False):
        batch = tok.encode_batch(wavs, dedup=dedup)
        single = [tok.encode(w, dedup=dedup) for w in wavs]
        for b, s in zip(batch, single):
            assert b.units.tolist() == s.units.tolist()
            assert b.starts.tolist() == s.starts.tolist() and b.ends.tolist() == s.ends.tolist()
    assert len({data[i].shape[0] for i in (3, 0, 5, 1)}) > 1 and tok.encode_batch([]) == []
