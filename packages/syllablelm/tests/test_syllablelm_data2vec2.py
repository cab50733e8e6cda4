"""data2vec2 encoder: key/shape manifest of the official config, strict loading of a synthetic SylBoost .pth,
and the official tokenizer assembled from generated files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.syllablelm.data2vec2 import (
    Data2Vec2AudioEncoder,
    Data2Vec2Config,
    alibi_slopes,
    load_sylboost_checkpoint,
    manifest,
)
from iclr25.syllablelm.tokenizer import SylBoostTokenizer

TINY = Data2Vec2Config(
    conv_layers=[(16, 10, 5), (16, 3, 2), (16, 2, 2)],
    embed_dim=32,
    heads=4,
    prenet_depth=1,
    depth=3,
    conv_pos_width=15,
    conv_pos_groups=4,
    conv_pos_depth=3,
    decoder_dim=16,
    decoder_groups=4,
    decoder_kernel=7,
    decoder_layers=2,
)


def test_official_manifest():
    m = manifest()
    assert len(m) == 192
    expect = {
        "modality_encoders.AUDIO.local_encoder.conv_layers.0.0.weight": (512, 1, 10),
        "modality_encoders.AUDIO.local_encoder.conv_layers.6.0.weight": (512, 512, 2),
        "modality_encoders.AUDIO.local_encoder.conv_layers.3.2.1.bias": (512,),
        "modality_encoders.AUDIO.project_features.1.weight": (512,),
        "modality_encoders.AUDIO.project_features.2.weight": (768, 512),
        "modality_encoders.AUDIO.relative_positional_encoder.5.0.weight": (768, 48, 19),
        "modality_encoders.AUDIO.alibi_scale": (1, 1, 12, 1, 1),
        "modality_encoders.AUDIO.context_encoder.blocks.3.attn.qkv.bias": (2304,),
        "modality_encoders.AUDIO.context_encoder.norm.weight": (768,),
        "modality_encoders.AUDIO.decoder.blocks.3.0.weight": (384, 24, 7),
        "modality_encoders.AUDIO.decoder.proj.weight": (768, 384),
        "blocks.7.mlp.fc2.weight": (768, 3072),
        "blocks.0.norm2.bias": (768,),
    }
    for k, shape in expect.items():
        assert m[k] == shape, k
    assert not any(k.startswith("blocks.8.") for k in m)


def test_alibi_slopes():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    s12 = alibi_slopes(12)
    torch.testing.assert_close(s12[:8], alibi_slopes(8))
    torch.testing.assert_close(s12[8:], alibi_slopes(16)[0::2][:4])


def test_forward_shapes_and_layers():
    torch.manual_seed(0)
    model = Data2Vec2AudioEncoder(TINY).eval()
    wav = torch.randn(2, 1234)
    out = model(wav)
    assert out.shape == (2, model.num_frames(1234), 32)
    # out_layer=-2 stops one block before the last
    assert not torch.allclose(model(wav, out_layer=-1), out)
    # each utterance is encoded independently of the other in the batch
    torch.testing.assert_close(model(wav[:1]), out[:1], rtol=1e-4, atol=1e-4)


def _write_checkpoint(path, model):
    torch.save({"model_seg": {"model." + k: v.half() for k, v in model.state_dict().items()}}, path)


def test_strict_loading_round_trip(tmp_path):
    torch.manual_seed(1)
    src = Data2Vec2AudioEncoder(TINY).eval()
    path = tmp_path / "sylboost.pth"
    _write_checkpoint(path, src)
    loaded = load_sylboost_checkpoint(path, TINY)
    for k, v in src.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v.half().float())
    wav = torch.randn(900)
    src.load_state_dict({k: v.half().float() for k, v in src.state_dict().items()})
    torch.testing.assert_close(loaded(wav), src(wav))
    sd = {"model." + k: v for k, v in src.state_dict().items()}
    del sd["model.blocks.0.norm1.weight"]
    torch.save({"model_seg": sd}, path)
    with pytest.raises(KeyError):
        load_sylboost_checkpoint(path, TINY)
    sd = {"model." + k: v for k, v in src.state_dict().items()}
    sd["model.blocks.0.norm1.weight"] = torch.zeros(31)
    torch.save({"model_seg": sd}, path)
    with pytest.raises(ValueError):
        load_sylboost_checkpoint(path, TINY)


def test_tokenizer_from_official_files(tmp_path):
    torch.manual_seed(2)
    _write_checkpoint(tmp_path / "sylboost.pth", Data2Vec2AudioEncoder(TINY))
    rng = np.random.default_rng(0)
    np.save(tmp_path / "km.npy", rng.normal(size=(10, 32)).astype(np.float32))
    np.save(tmp_path / "agg.npy", np.arange(10) // 2)
    tok = SylBoostTokenizer.from_official(
        tmp_path / "sylboost.pth", tmp_path / "km.npy", tmp_path / "agg.npy", rate="5.0hz", config=TINY
    )
    assert tok.vocab_size == 5 and tok.delta == pytest.approx(0.0019)
    units = tok.encode(torch.randn(16000))
    assert len(units) >= 1 and units.units.max() < 5
    assert units.starts[0] == 0 and units.ends[-1] == tok.encoder(torch.randn(16000)).shape[0]
