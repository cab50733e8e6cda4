"""Command line: ``python -m iclr25.mallowspo demo`` and ``python -m iclr25.mallowspo train --config FILE``.

Train config (JSON)::

    {"data": "prefs.jsonl",                      # TRL rows {"prompt", "chosen", "rejected"}: strings or messages
     "model": "path/to/local/hf/model" | {"arch": "gpt2", "n_layer": 2, "d_model": 64, "seed": 0},
     "output_dir": "runs/x",                     # checkpoints + the final model (save_pretrained)
     "calibrate": {"target_mean_scale": 1.0},    # optional (or true): set phi_star from the reference model
     "mallowspo": {...MallowsPOConfig fields...}}

``calibrate`` runs :func:`iclr25.mallowspo.calibrate_phi_star` on the reference model and the training pairs before
training and replaces ``phi_star`` so that the mean dispersion scale c(x) is ``target_mean_scale``: the official
``phi_star=0.29`` was set for Llama-3-8B on UltraFeedback, and on a near-uniform reference (a small or random-init
model, H̄ ≈ 1) it gives c ≈ 1e-3 and an almost flat loss.

A model given as a path is loaded with ``transformers.AutoModelForCausalLM`` (the reference is a second copy) and
its tokenizer with ``AutoTokenizer``; a dict builds a tiny random-init model with the byte tokenizer.
Conversational rows (lists of {"role", "content"} messages) are rendered with that tokenizer's chat template, with
one BOS at most (``data.tokenize_preference``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from pathlib import Path

import torch

from iclr25.shared import atomic_write, seed_everything

__all__ = ["main"]


def _cmd_demo(args) -> int:
    from .demo import format_bandit_table, format_generation_table, run_demo

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    res = run_demo(quick=args.quick, seed=args.seed)
    print("MallowsPO bandit (5 arms, 2 prompts, β=0.5; fits on sampled pairs; target = π_ref·exp(-μ0/β))")
    print(format_bandit_table(res["bandit"]))
    print()
    print("Synthetic sentiment generation (tiny GPT-2, byte vocab; '!' prompts: clear labels, '?': noisy labels)")
    print(format_generation_table(res["generation"]))
    print(f"\ntotal {res['seconds']:.1f} s")
    if args.json:
        with atomic_write(args.json, mode="w") as f:
            json.dump(res, f, indent=2, ensure_ascii=False)
    return 0


def _load_models(spec):
    from .models import byte_tokenizer, tiny_causal_lm

    if isinstance(spec, dict):
        model = tiny_causal_lm(**spec)
        return model, copy.deepcopy(model), byte_tokenizer()
    if isinstance(spec, str):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(spec)
        if not path.is_dir():
            raise ValueError(f"model path {spec!r} is not a local directory (no hub downloads)")
        model = AutoModelForCausalLM.from_pretrained(path)
        ref = AutoModelForCausalLM.from_pretrained(path)
        tok = AutoTokenizer.from_pretrained(path)
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return model, ref, tok
    raise TypeError("config 'model' must be a local model directory or a dict of tiny_causal_lm arguments")


def _cmd_train(args) -> int:
    from .config import MallowsPOConfig
    from .data.preference import load_preference_jsonl, tokenize_preference
    from .trainer import MallowsPOTrainer

    cfg_path = Path(args.config)
    with open(cfg_path) as f:
        spec = json.load(f)
    if not isinstance(spec, dict) or "data" not in spec or "model" not in spec:
        raise ValueError(f"{cfg_path}: the config needs at least 'data' and 'model'")
    unknown = set(spec) - {"data", "model", "output_dir", "mallowspo", "calibrate"}
    if unknown:
        raise ValueError(f"{cfg_path}: unknown keys {sorted(unknown)}")
    data_path = (cfg_path.parent / spec["data"]) if not Path(spec["data"]).is_absolute() else Path(spec["data"])
    mcfg = dict(spec.get("mallowspo", {}))
    if spec.get("output_dir"):
        mcfg.setdefault("output_dir", spec["output_dir"])
    config = MallowsPOConfig.from_dict(mcfg)
    seed_everything(config.seed)
    model, ref, tok = _load_models(spec["model"])
    rows = load_preference_jsonl(data_path)
    examples = tokenize_preference(rows, tok, max_length=config.max_length, max_prompt_length=config.max_prompt_length)
    calibrate = spec.get("calibrate")
    if calibrate:
        from .calibration import calibrate_phi_star

        opts = {} if calibrate is True else calibrate
        if not isinstance(opts, dict) or set(opts) - {"target_mean_scale"}:
            raise ValueError(f"{cfg_path}: 'calibrate' must be true or {{\"target_mean_scale\": <float > 0>}}")
        if config.loss_type == "sigmoid" or config.fixed_neg_log_dispersion is not None:
            raise ValueError(
                f"{cfg_path}: 'calibrate' needs the entropy estimator (loss_type != 'sigmoid', no fixed scale)"
            )
        cal = calibrate_phi_star(
            ref,
            examples,
            pad_token_id=tok.pad_token_id,
            target_mean_scale=float(opts.get("target_mean_scale", 1.0)),
            entropy_mode=config.entropy_mode,
            vocab_size=config.vocab_size,
            eps=config.dispersion_eps,
            backend=config.backend,
        )
        config = dataclasses.replace(config, phi_star=cal["phi_star"])
        print(json.dumps({"calibrated_phi_star": cal["phi_star"], "scale": cal["scale"], "phi": cal["phi"]}))
    trainer = MallowsPOTrainer(model, ref, config, pad_token_id=tok.pad_token_id)
    history = trainer.train(examples)
    for h in history[:: max(1, config.log_every)] + history[-1:]:
        print(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in h.items()}))
    if config.output_dir:
        out = Path(config.output_dir) / "final"
        model.save_pretrained(out)
        tok.save_pretrained(out)
        with atomic_write(Path(config.output_dir) / "history.json", mode="w") as f:
            json.dump(history, f, indent=1)
        print(f"saved model to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.mallowspo", description="MallowsPO (ICLR 2025)")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="bandit + tiny generation experiment, printed as tables")
    d.add_argument("--quick", action="store_true", help="a seconds-long smoke version")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--json", help="also write the results to this JSON file")
    d.set_defaults(func=_cmd_demo)
    t = sub.add_parser("train", help="train on a TRL-format preference JSONL")
    t.add_argument("--config", required=True, help="JSON config file (see the module docstring)")
    t.set_defaults(func=_cmd_train)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
