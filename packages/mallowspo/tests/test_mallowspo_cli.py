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
    assert {r["method"] for r in res["generation"]} == {"reference (SFT)", "DPO", "MallowsPO-θ"}


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
