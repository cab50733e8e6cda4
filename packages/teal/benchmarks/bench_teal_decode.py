"""End-to-end decode tokens/s, dense vs TEAL (uniform 40 % and 50 %), batch 1, greedy decoding.

CPU (measured in this repo): the shipped byte-level Shakespeare Llama (0.8 M parameters: launch/overhead bound) and a
random-weight "mid" Llama (hidden 2048, 4 layers, 0.18 B parameters: weight-streaming bound, like real decode), with
TEAL's torch column-skipping decode path (``backend="torch"``) and dense prefill (serving convention).
GPU (prepared, skipped without CUDA): a Llama-2-7B-shaped random-weight fp16 model with the Triton kernels, a static
KV cache and ``torch.compile(mode="reduce-overhead")`` (CUDA graphs), as in the paper's gpt-fast protocol; eager decode
is reported too. Thresholds come from calibrating on random tokens (their values do not change the speed).

    python packages/teal/benchmarks/bench_teal_decode.py --device cpu --out decode_cpu.json
    python packages/teal/benchmarks/bench_teal_decode.py --device cuda --out decode_gpu.json
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from iclr25.shared import write_result
from iclr25.teal import SparsityPlan, apply_teal, calibrate
from iclr25.teal.small_model import SmallModelConfig, build_model, load_small_model

LEVELS = (0.4, 0.5)
PAPER = {"0.4": 1.53, "0.5": 1.8}  # paper's single-batch decode speed-ups (A100, fp16, gpt-fast)


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def decode_tokens_per_s(model, prompt, new_tokens, repeats, device, **gen_kwargs):
    """Median tokens/s of ``generate`` (greedy, exactly ``new_tokens`` new tokens) after one warm-up run.

    On CPU the rate is computed from the calling thread's CPU time (torch runs single-threaded here), which is robust
    to time-slicing on a shared machine; on CUDA from synchronised wall time.
    """
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0, **gen_kwargs)
    model.generate(prompt, **kwargs)
    clock = time.perf_counter if device == "cuda" else time.thread_time
    rates = []
    for _ in range(repeats):
        _sync(device)
        t = clock()
        out = model.generate(prompt, **kwargs)
        _sync(device)
        rates.append((out.shape[1] - prompt.shape[1]) / (clock() - t))
    rates.sort()
    return rates[len(rates) // 2]


def run_model(name, model, device, new_tokens, repeats, backend, gen_kwargs=None, compile_model=False):
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    calib = calibrate(model, [torch.randint(0, vocab, (2, 128), generator=g).to(device)])
    prompt = torch.randint(0, vocab, (1, 16), generator=g).to(device)
    gen_kwargs = dict(gen_kwargs or {})
    if compile_model:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=False)
    dense = decode_tokens_per_s(model, prompt, new_tokens, repeats, device, **gen_kwargs)
    row = {"model": name, "backend": backend, "compiled": compile_model, "dense_tok_s": dense}
    for s in LEVELS:
        with apply_teal(model, calib, SparsityPlan.uniform(s), prefill="dense", backend=backend):
            if compile_model:
                torch._dynamo.reset()
            tps = decode_tokens_per_s(model, prompt, new_tokens, repeats, device, **gen_kwargs)
        row[f"teal_{s}_tok_s"] = tps
        row[f"speedup_{s}"] = tps / dense
    print(row, flush=True)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="bench_teal_decode.json")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    rows = []
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
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

        cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                          num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)  # fmt: skip
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg).to(torch.float16).eval()
        rows.append(run_model("llama-2-7b-shaped-fp16", model, "cuda", args.new_tokens, args.repeats, "triton"))
        static = {"cache_implementation": "static"}
        try:
            rows.append(run_model("llama-2-7b-shaped-fp16", model, "cuda", args.new_tokens, args.repeats, "triton",
                                  static, compile_model=True))  # fmt: skip
        except Exception as exc:  # report, do not hide: compile support differs across torch/transformers versions
            rows.append({"model": "llama-2-7b-shaped-fp16", "compiled": True, "error": repr(exc)[:500]})
            print(rows[-1], flush=True)
    write_result(args.out, {"name": "teal_decode", "params": {"device": args.device, "levels": list(LEVELS),
                                                              "new_tokens": args.new_tokens, "paper": PAPER},
                            "figures": {"rows": rows}})  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
