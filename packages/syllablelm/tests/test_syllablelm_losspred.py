"""LossPred oracles: mask schedule, coverage, gap batching, planted-boundary recovery; the HuBERT teacher."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.syllablelm.hubert import (
    HubertTeacher,
    LayerKMeansLabels,
    convert_fairseq_state_dict,
    small_hubert_config,
)
from iclr25.syllablelm.losspred import (
    MaskedPredictionTeacher,
    loss_matrix,
    loss_to_affinity,
    losspred_segment,
    mask_schedule,
    num_losspred_segments,
)


class OracleTeacher:
    """Loss 0.1 for a masked frame when a visible neighbour of its masked run shares its planted syllable, else 3."""

    def __init__(self, lengths):
        self.seg = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
        self.calls = []

    def labels(self, wav):
        return torch.zeros(len(self.seg), dtype=torch.long)

    def masked_losses(self, wav, mask, labels):
        self.calls.append(mask.clone())
        t = mask.shape[1]
        out = torch.zeros(mask.shape)
        for i, row in enumerate(mask.tolist()):
            a = 0
            while a < t:
                if not row[a]:
                    a += 1
                    continue
                b = a
                while b < t and row[b]:
                    b += 1
                neigh = [v for v in (a - 1, b) if 0 <= v < t]
                for f in range(a, b):
                    same = any(self.seg[v] == self.seg[f] for v in neigh)
                    out[i, f] = 0.1 if same else 3.0
                a = b
        return out


LENGTHS_LONG = [9, 12, 7, 15, 10, 8, 13, 11, 6, 14, 9, 12, 10, 8, 16, 7, 11]  # T = 178 > 150
LENGTHS_SHORT = [9, 12, 7, 15, 10, 8, 13, 11]  # T = 85 <= 150


def test_protocol():
    assert isinstance(OracleTeacher([3]), MaskedPredictionTeacher)


@pytest.mark.parametrize("t", [1, 40, 150, 151, 400])
def test_mask_schedule_counts(t):
    sched = mask_schedule(t)
    centres = sorted(mu for p in sched for mu in p)
    assert centres == list(range(-25, t + 25))  # every window exactly once
    assert len(sched) == (t + 50 if t <= 150 else 150)


@pytest.mark.parametrize("lengths", [LENGTHS_SHORT, LENGTHS_LONG])
def test_coverage_and_pass_count(lengths):
    teacher = OracleTeacher(lengths)
    t = sum(lengths)
    loss, counts = loss_matrix(teacher, None, batch_size=32)
    masks = torch.cat(teacher.calls)
    assert masks.shape[0] == (t + 50 if t <= 150 else 150)
    assert [c.shape[0] for c in teacher.calls][:-1] == [32] * (len(teacher.calls) - 1)
    # each window is 51 contiguous frames (clipped at the edges); windows sharing a pass are >= 99 frames apart
    for row in masks:
        idx = torch.nonzero(row).flatten()
        jumps = torch.nonzero(torch.diff(idx) > 1).flatten()
        runs = torch.tensor_split(idx, (jumps + 1).tolist())
        assert all(len(r) <= 51 for r in runs)
        assert all(len(r) == 51 for r in runs[1:-1])
        assert all(int(b[0]) - int(a[-1]) - 1 >= 99 for a, b in zip(runs[:-1], runs[1:]))
    off = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    band = ((off >= 1) & (off <= 25)) | ((off >= -26) & (off <= -1))
    assert (counts[band] == 1).all()
    assert (counts[~band] == 0).all()


def test_gap_batching_equals_per_window():
    teacher = OracleTeacher(LENGTHS_LONG)
    batched, _ = loss_matrix(teacher, None, gap=150)
    single, _ = loss_matrix(OracleTeacher(LENGTHS_LONG), None, gap=10**9)
    torch.testing.assert_close(batched, single, rtol=0, atol=0)


@pytest.mark.parametrize("lengths", [LENGTHS_SHORT, LENGTHS_LONG])
def test_oracle_teacher_recovers_planted_boundaries(lengths):
    teacher = OracleTeacher(lengths)
    borders = losspred_segment(teacher, None, num_segments=len(lengths))
    assert borders.tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()


def test_default_segment_count_counts_borders():
    """The notebook's K = floor(T / (50 * 0.16)) + 1 counts borders: T = 400 gives 51 borders, 50 segments."""
    assert num_losspred_segments(400) == 50
    assert num_losspred_segments(85, sec_per_syllable=0.2) == 8  # K = floor(85 / 10) + 1 = 9 borders
    assert num_losspred_segments(3) == 1  # K = 1 border would be no segment at all: one segment
    with pytest.raises(ValueError, match="num_frames"):
        num_losspred_segments(0)
    # T = 85 frames, 8 planted syllables; at 0.2 s per syllable the default count recovers them exactly
    borders = losspred_segment(OracleTeacher(LENGTHS_SHORT), None, sec_per_syllable=0.2)
    assert borders.tolist() == np.concatenate([[0], np.cumsum(LENGTHS_SHORT)]).tolist()


def test_affinity_band():
    loss = torch.full((60, 60), 2.0)
    counts = torch.ones(60, 60, dtype=torch.int32)
    a = loss_to_affinity(loss, counts)
    assert float(a[10, 35]) == pytest.approx(np.exp(-2.0))  # offset +25: in band
    assert float(a[36, 10]) == pytest.approx(np.exp(-100.0))  # offset -26: excluded
    assert float(a[10, 10]) == pytest.approx(np.exp(-100.0))


def _tiny_teacher(num_classes=7):
    torch.manual_seed(0)
    cfg = small_hubert_config(hidden=16, layers=1, heads=2, conv_dim=8)
    return HubertTeacher(cfg, num_classes, final_dim=8, label_fn=lambda w: torch.arange(29) % num_classes)


def test_hubert_teacher_masked_losses():
    teacher = _tiny_teacher().eval()
    wav = torch.randn(16000 * 29 // 50 + 80)
    assert teacher.num_frames(wav.shape[0]) == 29
    labels = teacher.labels(wav)
    mask = torch.zeros(3, 29, dtype=torch.bool)
    mask[1, 5:12] = True
    mask[2, :] = True
    losses = teacher.masked_losses(wav, mask, labels)
    assert losses.shape == (3, 29)
    # masking changes the losses, and an identical mask gives identical losses
    assert not torch.allclose(losses[0], losses[1])
    torch.testing.assert_close(losses[0], teacher.masked_losses(wav, mask[:1], labels)[0])
    # all masked: every frame sees the mask embedding, so the result does not depend on the audio
    other = teacher.masked_losses(torch.randn_like(wav), mask[2:], labels)[0]
    torch.testing.assert_close(losses[2], other, rtol=1e-4, atol=1e-4)


def test_fairseq_key_map_round_trip(tmp_path):
    teacher = _tiny_teacher()
    ours = teacher.state_dict()
    inverse = {
        "hubert.masked_spec_embed": "mask_emb",
        "hubert.feature_projection.layer_norm.weight": "layer_norm.weight",
        "hubert.feature_projection.layer_norm.bias": "layer_norm.bias",
        "hubert.feature_projection.projection.weight": "post_extract_proj.weight",
        "hubert.feature_projection.projection.bias": "post_extract_proj.bias",
        "hubert.encoder.pos_conv_embed.conv.bias": "encoder.pos_conv.0.bias",
        "hubert.encoder.pos_conv_embed.conv.parametrizations.weight.original0": "encoder.pos_conv.0.weight_g",
        "hubert.encoder.pos_conv_embed.conv.parametrizations.weight.original1": "encoder.pos_conv.0.weight_v",
        "hubert.encoder.layer_norm.weight": "encoder.layer_norm.weight",
        "hubert.encoder.layer_norm.bias": "encoder.layer_norm.bias",
        "final_proj.weight": "final_proj.weight",
        "final_proj.bias": "final_proj.bias",
        "label_embs_concat": "label_embs_concat",
    }
    for i in range(7):
        inverse[f"hubert.feature_extractor.conv_layers.{i}.conv.weight"] = f"feature_extractor.conv_layers.{i}.0.weight"
    for p in ("weight", "bias"):
        inverse[f"hubert.feature_extractor.conv_layers.0.layer_norm.{p}"] = f"feature_extractor.conv_layers.0.2.{p}"
        for n in ("k", "v", "q", "out"):
            inverse[f"hubert.encoder.layers.0.attention.{n}_proj.{p}"] = f"encoder.layers.0.self_attn.{n}_proj.{p}"
        inverse[f"hubert.encoder.layers.0.layer_norm.{p}"] = f"encoder.layers.0.self_attn_layer_norm.{p}"
        inverse[f"hubert.encoder.layers.0.feed_forward.intermediate_dense.{p}"] = f"encoder.layers.0.fc1.{p}"
        inverse[f"hubert.encoder.layers.0.feed_forward.output_dense.{p}"] = f"encoder.layers.0.fc2.{p}"
        inverse[f"hubert.encoder.layers.0.final_layer_norm.{p}"] = f"encoder.layers.0.final_layer_norm.{p}"
    assert set(inverse) == set(ours)
    fairseq = {"model": {inverse[k]: torch.randn_like(v) for k, v in ours.items()}}
    converted = convert_fairseq_state_dict(fairseq)
    fresh = _tiny_teacher()
    fresh.load_state_dict(converted, strict=True)
    torch.save(fairseq, tmp_path / "hubert.pt")
    loaded = HubertTeacher.from_fairseq(tmp_path / "hubert.pt", fresh.config, 7, 8)
    torch.testing.assert_close(loaded.final_proj.weight, fairseq["model"]["final_proj.weight"])
    for k, v in fresh.state_dict().items():
        torch.testing.assert_close(v, fairseq["model"][inverse[k]])
    with pytest.raises(KeyError):
        convert_fairseq_state_dict({"bogus.weight": torch.zeros(1)})


def test_layer_kmeans_labels_as_label_fn():
    label_model = _tiny_teacher()
    centroids = torch.randn(5, 16)
    label_fn = LayerKMeansLabels(label_model, layer=1, centroids=centroids)
    wav = torch.randn(16000)
    labels = label_fn(wav)
    feats = label_model.hidden_states(wav)[1][0]
    expect = torch.cdist(feats.detach(), centroids).argmin(1)
    assert torch.equal(labels, expect)
    teacher = _tiny_teacher(num_classes=5)
    teacher.label_fn = label_fn
    assert teacher.labels(wav).shape == (teacher.num_frames(16000),)
