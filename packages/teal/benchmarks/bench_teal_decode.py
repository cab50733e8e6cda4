"""End-to-end decode tokens/s, dense vs TEAL (uniform 40 % and 50 %), batch 1, greedy decoding.

CPU (measured in this repo): the shipped byte-level Shakespeare Llama (0.8 M parameters: launch/overhead bound) and a
random-weight "mid" Llama (hidden 2048, 4 layers, 0.18 B parameters: weight-streaming bound, like real decode), with
TEAL's torch column-skipping decode path (``backend="torch"``) and dense prefill (serving convention).
GPU (prepared, skipped without CUDA): a Llama-2-7B-shaped random-weight fp16 model with the Triton kernels, a static
KV cache and ``torch.compile(mode="reduce-overhead")`` (CUDA graphs), as in the paper's gpt-fast protocol; eager decode
is reported too. Thresholds come from calibrating on random tokens (their values do not change the speed).

    python packages/teal/benchmarks/bench_teal_decode.py --device cpu --out decode_cpu.json
    python packages/teal/benchmarks/bench_teal_decode.py --device cuda --out decode_gpu.json   # --quick: 4 layers

Every figure is the median [min-max] over interleaved rounds (dense and each level once per round, order rotating)
after a warm-up round; speed-ups are per-round ratios. CPU runs record the ISA torch dispatches to and the thread count.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

import torch

from iclr25.shared import write_result
from iclr25.teal import SparsityPlan, apply_teal, calibrate
from iclr25.teal.benchutil import cpu_environment, fmt_spread, ratio_summary, summarize
from iclr25.teal.small_model import SmallModelConfig, build_model, load_small_model

GPU_ARGS = ["--device", "cuda", "--quick"]
LEVELS = (0.4, 0.5)
PAPER = {"0.4": 1.53, "0.5": 1.8}  # paper's single-batch decode speed-ups (A100, fp16, gpt-fast)


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def decode_rate(model, prompt, new_tokens, device, **gen_kwargs):
    """Tokens/s of one ``generate`` call (greedy, exactly ``new_tokens`` new tokens).

    On CPU the rate is computed from the calling thread's CPU time (torch runs single-threaded here), which is robust
    to time-slicing on a shared machine; on CUDA from synchronised wall time.
    """
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0, **gen_kwargs)
    clock = time.perf_counter if device == "cuda" else time.thread_time
    _sync(device)
    t = clock()
    out = model.generate(prompt, **kwargs)
    _sync(device)
    return (out.shape[1] - prompt.shape[1]) / (clock() - t)


def run_model(name, model, device, new_tokens, repeats, backend, gen_kwargs=None, compile_model=False):
    """Dense and TEAL (each level of LEVELS) decode, interleaved: every round runs dense and each level once.

    The TEAL model is a copy sharing the dense model's weights; levels are switched with ``handle.set_plan`` (no
    re-wrapping). One warm-up round (also compiles, with ``compile_model``) precedes ``repeats`` timed rounds.
    """
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    calib = calibrate(model, [torch.randint(0, vocab, (2, 128), generator=g).to(device)])
    prompt = torch.randint(0, vocab, (1, 16), generator=g).to(device)
    gen_kwargs = dict(gen_kwargs or {})
    teal = copy.deepcopy(model, memo={id(p): p for p in model.parameters()})
    handle = apply_teal(teal, calib, SparsityPlan.uniform(LEVELS[0]), prefill="dense", backend=backend)
    if compile_model:
        for m in (model, teal):
            m.forward = torch.compile(m.forward, mode="reduce-overhead", fullgraph=False)
    rates = {"dense": [], **{s: [] for s in LEVELS}}
    try:
        keys = list(rates)
        for r in range(repeats + 1):  # round 0: warm-up
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:  # rotated order: none always runs first
                if key == "dense":
                    rate = decode_rate(model, prompt, new_tokens, device, **gen_kwargs)
                else:
                    handle.set_plan(SparsityPlan.uniform(key))
                    rate = decode_rate(teal, prompt, new_tokens, device, **gen_kwargs)
                if r > 0:
                    rates[key].append(rate)
        extra = handle.extra_bytes()
    finally:
        handle.remove()
    row = {"model": name, "dtype": str(next(model.parameters()).dtype).replace("torch.", ""), "backend": backend,
           "compiled": compile_model, "new_tokens": new_tokens, "dense_tok_s": summarize(rates["dense"]),
           "decode_copy_bytes": extra}  # fmt: skip
    for s in LEVELS:
        row[f"teal_{s}_tok_s"] = summarize(rates[s])
        row[f"speedup_{s}"] = ratio_summary(rates[s], rates["dense"])  # per round: TEAL rate / dense rate
    print(
        f"{name} ({backend}{', compiled' if compile_model else ''}): dense {row['dense_tok_s']['median']:.2f} tok/s | "
        + " ".join(f"s={s}: {fmt_spread(row[f'speedup_{s}'])}x" for s in LEVELS),
        flush=True,
    )
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="bench_teal_decode.json")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5, help="interleaved timed rounds (after one warm-up round)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--quick", action="store_true", help="GPU: 4 layers of the 7B shape, 16 tokens, eager only; CPU: mid model only"
    )
    args = p.parse_args(argv)
    if args.repeats < 1 or args.new_tokens < 1:
        p.error("--repeats and --new-tokens must be >= 1")
    rows = []
    params = {"device": args.device, "levels": list(LEVELS), "new_tokens": args.new_tokens, "repeats": args.repeats,
              "warmup_rounds": 1, "interleaved": True, "prefill": "dense", "paper": PAPER}  # fmt: skip
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
        params.update(cpu_environment())
        if not args.quick:
            rows.append(
                run_model("shakespeare-llama-0.8M", load_small_model(), "cpu", args.new_tokens, args.repeats, "torch")
            )
        for dtype in (torch.float32, torch.bfloat16):
            mid = SmallModelConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4, num_attention_heads=16,
                                   num_key_value_heads=4, max_position_embeddings=512)  # fmt: skip
            model = build_model("llama", mid).to(dtype)
            name = f"random-llama-0.18B-{str(dtype).replace('torch.', '')}"
            rows.append(run_model(name, model, "cpu", max(8, args.new_tokens // 2), args.repeats, "torch"))
            del model
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: GPU decode benchmark skipped")
            return 0
        from transformers import LlamaConfig, LlamaForCausalLM

        layers = 4 if args.quick else 32
        cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=layers, num_attention_heads=32,
                          num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)  # fmt: skip
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg).to(torch.float16).eval()
        name = f"llama-2-7b-shaped-{layers}-layers-fp16"
        repeats = min(args.repeats, 3) if args.quick else args.repeats
        new_tokens = min(args.new_tokens, 16) if args.quick else args.new_tokens
        params.update({"repeats": repeats, "new_tokens": new_tokens})
        rows.append(run_model(name, model, "cuda", new_tokens, repeats, "triton"))
        if not args.quick:
            static = {"cache_implementation": "static"}
            try:
                rows.append(run_model(name, model, "cuda", new_tokens, repeats, "triton", static, compile_model=True))
            except Exception as exc:  # report, do not hide: compile support differs across torch/transformers
                rows.append({"model": name, "compiled": True, "error": repr(exc)[:500]})
                print(rows[-1], flush=True)
    write_result(args.out, {"name": "teal_decode", "params": params, "figures": {"rows": rows}})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
