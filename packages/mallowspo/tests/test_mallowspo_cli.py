"""CLI: the quick demo prints both tables; ``train --config`` runs on a generated JSONL and saves a model."""

import json

import numpy as np
import pytest

from iclr25.mallowspo.cli import main
from iclr25.mallowspo.data import SyntheticSentiment, save_preference_jsonl


@pytest.mark.integration
def test_quick_demo(capsys, tmp_path):
    out = tmp_path / "demo.json"
    assert main(["demo", "--quick", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "MallowsPO-θ" in text and "MallowsPO-ϕ" in text and "reward(!)" in text
    res = json.loads(out.read_text())
    methods = [r["method"] for r in res["bandit"]]
    assert methods.count("DPO") == 2
    assert {r["method"] for r in res["generation"]} == {"reference (SFT)", "DPO", "MallowsPO-θ", "MallowsPO-ϕ"}
    # every method leaves policy = reference: a non-zero first gradient and moved parameters, ϕ included
    for r in res["generation"]:
        if r["method"] != "reference (SFT)":
            assert r["grad_norm_step1"] > 0 and r["moved"] > 0, r
    for r in res["bandit"]:
        if not r["method"].startswith("target"):
            assert r["grad_norm_at_ref"] > 1e-3, r


@pytest.mark.integration
def test_train_from_config(tmp_path, capsys):
    task = SyntheticSentiment()
    rng = np.random.default_rng(0)
    prompts = [task.prompt(rng) for _ in range(8)]
    a = ["abab", "cc", "aaa", "hhh", "ab", "gg", "a", "d"]
    b = ["dd", "ab", "eee", "b", "gh", "aa", "ff", "aab"]
    save_preference_jsonl(tmp_path / "prefs.jsonl", task.label_pairs(prompts, a, b, rng))
    cfg = {
        "data": "prefs.jsonl",
        "model": {"arch": "llama", "n_layer": 1, "d_model": 32, "n_head": 2},
        "output_dir": str(tmp_path / "run"),
        "mallowspo": {"beta": 0.5, "per_device_batch_size": 2, "gradient_accumulation_steps": 2, "learning_rate": 1e-3},
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    assert main(["train", "--config", str(tmp_path / "cfg.json")]) == 0
    assert (tmp_path / "run" / "final" / "config.json").is_file()
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    assert len(json.loads((tmp_path / "run" / "history.json").read_text())) == 2
    bad = dict(cfg, mallowspo={"betta": 1})
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["train", "--config", str(tmp_path / "bad.json")]) == 2
    assert "unknown MallowsPOConfig fields" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.parametrize("loss_type", ["mallows_dpo", "mallows_phi"])
@pytest.mark.parametrize("calibrate", [False, True])
def test_cli_training_from_the_reference_moves_the_policy(tmp_path, capsys, loss_type, calibrate):
    # the CLI's reference is a copy of the initial policy, so every run starts at Δ = 0
    from transformers import AutoModelForCausalLM

    from iclr25.mallowspo.models import tiny_causal_lm

    rows = [
        {"prompt": "!ab:", "chosen": "aab", "rejected": "dd"},
        {"prompt": "?x:", "chosen": "ab", "rejected": "hhg"},
        {"prompt": "!q:", "chosen": "abab", "rejected": "c"},
        {"prompt": "?z:", "chosen": "bb", "rejected": "fff"},
    ]
    save_preference_jsonl(tmp_path / "prefs.jsonl", rows)
    model = {"arch": "gpt2", "n_layer": 1, "d_model": 32, "n_head": 2, "seed": 3}
    cfg = {
        "data": "prefs.jsonl",
        "model": model,
        "output_dir": str(tmp_path / "run"),
        "mallowspo": {
            "loss_type": loss_type,
            "beta": 0.5,
            "reference_free": False,
            "length_normalization": False,
            "per_device_batch_size": 4,
            "gradient_accumulation_steps": 1,
            "learning_rate": 1e-3,
            "warmup_ratio": 0.0,
            "num_epochs": 2,
        },
    }
    if calibrate:
        cfg["calibrate"] = {"target_mean_scale": 1.0}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    assert main(["train", "--config", str(tmp_path / "cfg.json")]) == 0
    out = capsys.readouterr().out
    hist = json.loads((tmp_path / "run" / "history.json").read_text())
    assert hist[0]["rewards/margins"] == 0.0  # really started at the reference
    assert hist[0]["grad_norm"] > 0.0
    if calibrate:
        assert "calibrated_phi_star" in out
        assert hist[0]["neg_log_dispersion"] == pytest.approx(1.0, rel=1e-3)  # all pairs in one batch
        assert hist[0]["grad_norm"] > 1e-3
    init = tiny_causal_lm(**model)
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "final")
    moved = max((a - b).abs().max().item() for a, b in zip(final.state_dict().values(), init.state_dict().values()))
    assert moved > 1e-4
    if calibrate:
        assert hist[1]["rewards/margins"] > 0  # the first step raised the chosen log-prob relative to the rejected


def test_cli_calibrate_errors(tmp_path, capsys):
    save_preference_jsonl(tmp_path / "p.jsonl", [{"prompt": "a", "chosen": "b", "rejected": "c"}])
    cfg = {"data": "p.jsonl", "model": {"n_layer": 1, "d_model": 32, "n_head": 2}, "calibrate": {"target": 1}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["train", "--config", str(tmp_path / "c.json")]) == 2
    assert "'calibrate' must be true" in capsys.readouterr().err
    cfg = dict(cfg, calibrate=True, mallowspo={"loss_type": "sigmoid"})
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["train", "--config", str(tmp_path / "c.json")]) == 2
    assert "needs the entropy estimator" in capsys.readouterr().err
