"""LM demo: unit LM on the synthetic language, pair accuracies, and the token-rate / compute comparison."""

from __future__ import annotations

import time

import numpy as np
import torch

from .data.lm_tasks import PseudoLanguage
from .data.synth import SYLLABLES, PhonemeMismatch, synthesize_words
from .lm import SyllableLM, SyllableLMConfig, analytic_num_params
from .lm_train import LMTrainConfig, pair_accuracy, train_lm
from .tokenizer import SylBoostTokenizer

SMALL = SyllableLMConfig(vocab=64, depth=2, heads=4, dim=128, mlp_ratio=4, dropout=0.1, max_pos=256)


def _speak(words, rng):
    for _ in range(5):
        try:
            return synthesize_words(
                words, voice="en", rate=int(rng.integers(150, 200)), pitch=int(rng.integers(35, 65))
            )
        except PhonemeMismatch:
            continue
    return None


def _units(tok: SylBoostTokenizer, utt) -> list[int]:
    return tok.encode(utt.wav).units.tolist()


def lm_flops_per_token(cfg: SyllableLMConfig, context: int) -> float:
    """Forward FLOPs per token: 2 x non-embedding parameters + output projection + attention over ``context``."""
    d = cfg.dim
    dense = 2 * (analytic_num_params(cfg) - (cfg.vocab + 1) * d - cfg.max_pos * d)
    return dense + 2 * (cfg.vocab + 1) * d + cfg.depth * 4 * context * d


def run_lm_demo(
    tok: SylBoostTokenizer,
    seed: int = 0,
    n_train: int = 240,
    steps: int = 600,
    n_pairs: int = 40,
    verbose: bool = False,
) -> dict:
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    lang = PseudoLanguage(seed=seed)
    train_utts = [u for u in (_speak(lang.sentence(rng), rng) for _ in range(n_train)) if u is not None]
    pairs = {"sBLIMP-like": lang.blimp_pairs(n_pairs, seed + 1), "sWUGGY-like": lang.wuggy_pairs(n_pairs, seed + 2)}
    spoken = {}
    for name, ps in pairs.items():
        spoken[name] = [(g, b) for g, b in ((_speak(g, rng), _speak(b, rng)) for g, b in ps) if g and b]

    results = {}
    syl_ids = {s: i for i, s in enumerate(SYLLABLES)}

    def syl_seq(utt):
        return [syl_ids[s] for _, _, s in utt.syllables]

    for kind in ("SylBoost units", "true syllables (oracle)"):
        if kind.startswith("SylBoost"):
            seqs = [_units(tok, u) for u in train_utts]
            enc = _units
            vocab = tok.vocab_size
        else:
            seqs = [syl_seq(u) for u in train_utts]
            enc = None
            vocab = len(SYLLABLES)
        cfg = SyllableLMConfig(**{**SMALL.__dict__, "vocab": max(vocab, 2)})
        torch.manual_seed(seed)
        model = SyllableLM(cfg)
        train_lm(model, seqs, LMTrainConfig(steps=steps, lr=2e-3, batch_size=16, seed=seed), verbose=verbose)
        row = {}
        for name, ps in spoken.items():
            if enc is not None:
                pp = [(enc(tok, g), enc(tok, b)) for g, b in ps]
            else:
                pp = [(syl_seq(g), syl_seq(b)) for g, b in ps]
            row[name] = pair_accuracy(model, [(g, b) for g, b in pp if min(g + b, default=0) < cfg.vocab])
        results[kind] = row

    audio = sum(u.duration for u in train_utts)
    unit_rate = sum(len(s) for s in (_units(tok, u) for u in train_utts[:40])) / sum(
        u.duration for u in train_utts[:40]
    )
    base = SyllableLMConfig()
    context_s = 30.0
    eff = {}
    for name, rate in (
        ("SylBoost units (measured)", unit_rate),
        ("5.0 Hz", 5.0),
        ("6.25 Hz", 6.25),
        ("8.33 Hz", 8.33),
        ("25 Hz frames", 25.0),
        ("50 Hz frames", 50.0),
    ):
        ctx = int(rate * context_s)
        eff[name] = {"tokens_per_s": rate, "gflops_per_audio_s": rate * lm_flops_per_token(base, ctx) / 1e9}
    # measured: score 20 s of audio worth of tokens with the same (small) transformer at each rate
    timing = {}
    model = SyllableLM(SyllableLMConfig(**{**SMALL.__dict__, "max_pos": 1100})).eval()
    for name, rate in (("6.25 Hz", 6.25), ("25 Hz", 25.0), ("50 Hz", 50.0)):
        seq = torch.randint(0, 64, (int(rate * 20),))
        t = time.perf_counter()
        for _ in range(3):
            model.score(seq)
        timing[name] = (time.perf_counter() - t) / 3
    out = {
        "pair_accuracy": results,
        "efficiency": eff,
        "score_time_20s_audio": timing,
        "train_audio_s": audio,
        "seconds": time.perf_counter() - t0,
    }
    print(format_lm(out))
    return out


def format_lm(out: dict) -> str:
    lines = ["", "Unit LM on the synthetic language (pair accuracy by log-likelihood; chance = 0.5)"]
    names = list(next(iter(out["pair_accuracy"].values())))
    lines.append(f"{'tokens':<26}" + "".join(f"{n:>14}" for n in names))
    for kind, row in out["pair_accuracy"].items():
        lines.append(f"{kind:<26}" + "".join(f"{row[n]:>14.3f}" for n in names))
    lines.append("")
    lines.append("LM compute per second of audio (base config, 30 s context; analytic forward FLOPs)")
    ref = out["efficiency"]["50 Hz frames"]["gflops_per_audio_s"]
    for name, e in out["efficiency"].items():
        lines.append(
            f"  {name:<26}{e['tokens_per_s']:>7.2f} tok/s {e['gflops_per_audio_s']:>9.2f} GFLOP/s-audio "
            f"({ref / e['gflops_per_audio_s']:.1f}x less than 50 Hz)"
        )
    t = out["score_time_20s_audio"]
    lines.append(
        "  measured scoring time of 20 s of audio, small LM: "
        + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in t.items())
        + f" (50 Hz / 6.25 Hz = {t['50 Hz'] / t['6.25 Hz']:.1f}x)"
    )
    lines.append(f"LM part: {out['train_audio_s']:.0f} s of training audio, wall time {out['seconds']:.1f} s")
    return "\n".join(lines)
