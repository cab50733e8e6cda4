"""Training-step time of MallowsPO vs TRL's DPOTrainer on identical batches (same model, same reference).

Timed: loss + backward for one batch (the optimiser step is identical for all and left out), median of
interleaved repeats.
Variants: TRL ``DPOTrainer(loss_type=["sigmoid"])`` (baseline), our TRL drop-in ``MallowsDPOTrainer`` (entropy
dispersion), and our standalone ``MallowsPOTrainer`` (mallows_dpo with the entropy estimator). Ratios are
variant / TRL, measured in one run.

    python packages/mallowspo/benchmarks/bench_trainer_step.py --vocab 32000 --out results/mallowspo_step.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--completion-len", type=int, default=48)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/mallowspo_trainer_step.json")
    args = ap.parse_args()

    import numpy as np
    import torch

    try:
        from datasets import Dataset
        from trl import DPOConfig, DPOTrainer
    except ImportError:
        print("trl/datasets not installed (pip install 'iclr25-mallowspo[trl]'): trainer-step benchmark skipped")
        return

    from iclr25.mallowspo import MallowsPOConfig, MallowsPOTrainer
    from iclr25.mallowspo.integrations.trl import MallowsDPOConfig, MallowsDPOTrainer
    from iclr25.mallowspo.models import byte_tokenizer, tiny_causal_lm
    from iclr25.shared import benchmark, write_result

    torch.set_num_threads(args.threads)
    tok = byte_tokenizer()
    rng = np.random.default_rng(0)
    letters = list("abcdefghij")

    def text(n):
        return "".join(rng.choice(letters, size=n))

    rows = [
        {"prompt": text(16), "chosen": text(args.completion_len), "rejected": text(args.completion_len - 5)}
        for _ in range(args.pairs)
    ]
    ds = Dataset.from_list(rows)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = tiny_causal_lm(vocab_size=args.vocab, n_layer=args.layers, d_model=args.d_model, seed=1).to(dev)
    ref = tiny_causal_lm(vocab_size=args.vocab, n_layer=args.layers, d_model=args.d_model, seed=2).to(dev)
    kw = dict(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=args.pairs,
        report_to=[],
        beta=0.1,
        use_cpu=dev == "cpu",
        max_steps=1,
        dataloader_num_workers=0,
        save_strategy="no",
    )

    def make(cls, cfg):
        return cls(
            model=copy.deepcopy(model), ref_model=copy.deepcopy(ref), args=cfg, train_dataset=ds, processing_class=tok
        )

    trl_t = make(DPOTrainer, DPOConfig(loss_type=["sigmoid"], **kw))
    drop_in = make(MallowsDPOTrainer, MallowsDPOConfig(**kw))
    batch = {k: v.to(dev) for k, v in next(iter(trl_t.get_train_dataloader())).items()}
    ours = MallowsPOTrainer(
        copy.deepcopy(model),
        copy.deepcopy(ref),
        MallowsPOConfig(loss_type="mallows_dpo", beta=0.1, reference_free=False, length_normalization=False),
        pad_token_id=tok.pad_token_id,
    )

    def step_trl(tr):
        def fn():
            tr.model.zero_grad(set_to_none=True)
            tr.compute_loss(tr.model, batch).backward()

        return fn

    def step_ours():
        ours.model.zero_grad(set_to_none=True)
        ours.compute_loss(batch)[0].backward()

    variants = {
        "trl_dpo_sigmoid": step_trl(trl_t),
        "mallows_trl_dropin": step_trl(drop_in),
        "mallows_standalone": step_ours,
    }
    # interleaved repeats (round-robin) so that load drift on a shared machine hits every variant alike
    for fn in variants.values():
        benchmark(fn, warmup=1, repeat=1)
    times = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, fn in variants.items():
            times[name].append(benchmark(fn, warmup=0, repeat=1).median)
    figures = {
        name: {"median_s": float(np.median(t)), "min_s": float(np.min(t)), "max_s": float(np.max(t))}
        for name, t in times.items()
    }
    base = figures["trl_dpo_sigmoid"]["median_s"]
    figures["ratio_trl_dropin_over_trl"] = figures["mallows_trl_dropin"]["median_s"] / base
    figures["ratio_standalone_over_trl"] = figures["mallows_standalone"]["median_s"] / base
    record = {
        "name": "mallowspo_trainer_step",
        "params": {
            **{k: v for k, v in vars(args).items() if k != "out"},
            "device": dev,
            "tokens_per_batch": int(batch["attention_mask"].sum()),
        },
        "figures": figures,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, record)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
