"""Command line: ``python -m iclr25.syllablelm {demo,tokenize,pretrain}``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from iclr25.shared import atomic_write


def _demo(args) -> int:
    from .pipeline import PipelineConfig, format_table, run_pipeline

    torch.set_num_threads(max(1, args.threads))
    cfg = PipelineConfig(n_train=args.n_train, n_eval=args.n_eval, seed=args.seed)
    res = run_pipeline(cfg, verbose=args.verbose)
    print(
        f"SyllableLM units on synthetic espeak-ng speech ({cfg.n_train} train / {cfg.n_eval} eval utterances, "
        f"small HuBERT-style encoder trained here)"
    )
    print(format_table(res))
    print(f"wall time {res.seconds:.1f} s")
    if args.save:
        out = Path(args.save)
        out.mkdir(parents=True, exist_ok=True)
        res.tokenizer.save(out / "tokenizer.npz")
        from .pretrain import save_small_hubert

        save_small_hubert(res.student, out / "student.pt")
    if args.json:
        with atomic_write(args.json, "w") as f:
            json.dump({"rows": res.rows, "units": res.units, "seconds": res.seconds}, f, indent=2, default=float)
    if args.lm:
        from .lm_demo import run_lm_demo

        run_lm_demo(res.tokenizer, seed=args.seed, verbose=args.verbose)
    return 0


def _tokenize(args) -> int:
    from .data.loaders import load_audio
    from .pipeline import _features
    from .pretrain import load_small_hubert
    from .tokenizer import SylBoostTokenizer

    model_dir = Path(args.model)
    student = load_small_hubert(model_dir / "student.pt")
    tok = SylBoostTokenizer.load(model_dir / "tokenizer.npz", lambda w: _features(student, w, -2))
    out = {}
    for p in args.wavs:
        units = tok.encode(load_audio(p))
        out[p] = [{"unit": int(u), "start": s, "end": e} for u, s, e in units.seconds()]
    text = json.dumps(out, indent=1)
    if args.out:
        with atomic_write(args.out, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


def _pretrain(args) -> int:
    from .data.synth import make_corpus
    from .pretrain import PretrainConfig, pretrain_small_hubert, save_small_hubert

    torch.set_num_threads(max(1, args.threads))
    corpus = make_corpus(args.n_utterances, seed=100)
    model = pretrain_small_hubert([u.wav for u in corpus], PretrainConfig(steps=args.steps), verbose=True)
    save_small_hubert(model, args.out)
    print(f"wrote {args.out}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.syllablelm", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="LossPred -> SylBoost -> units on synthetic speech; prints the table")
    d.add_argument("--n-train", type=int, default=40)
    d.add_argument("--n-eval", type=int, default=12)
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--json", default=None, help="also write the figures as JSON")
    d.add_argument("--save", default=None, help="directory for the trained student and tokenizer")
    d.add_argument("--lm", action="store_true", help="also train a small unit LM and run the pair evaluations")
    d.add_argument("--verbose", action="store_true")
    d.set_defaults(fn=_demo)
    t = sub.add_parser("tokenize", help="WAV files -> units as JSON")
    t.add_argument("wavs", nargs="+")
    t.add_argument("--model", required=True, help="directory written by `demo --save`")
    t.add_argument("--out", default=None)
    t.set_defaults(fn=_tokenize)
    p = sub.add_parser("pretrain", help="train the small HuBERT-style encoder on synthetic speech")
    p.add_argument("--out", default="small_hubert.pt")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--n-utterances", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(fn=_pretrain)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
