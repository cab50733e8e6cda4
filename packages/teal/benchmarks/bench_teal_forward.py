"""Multi-token forwards (prefill, evaluation, a batch of decode steps) with TEAL applied vs the dense model.

TEAL speeds up only single-token decode; every other forward must run as fast as the dense model. This times, in one
run and interleaved round by round (one warm-up round, then ``--repeats`` rounds), a 64-token forward ``[1, 64]`` and
a batch of 8 one-token steps ``[8, 1]`` (no cache) of a random-weight Llama (hidden 2048, 4 layers, 0.18 B parameters) in fp32
and bf16:

* ``dense``: the plain model (baseline: what a user runs without TEAL);
* ``teal_auto``: ``apply_teal(s=0.5, prefill="last_half", backend="auto")`` (the defaults);
* ``teal_torch``: the same with ``backend="torch"``, which holds a column-major copy of every weight for the decode
  kernel (the multi-token forwards must still use the row-major weight);
* ``old_layout``: the dense model with every projection weight stored column-major (``W^T`` contiguous), as the
  previous TEAL wrapper stored it: ``F.linear`` on that layout is what made multi-token forwards slow.

The wrapped models share the dense model's weight tensors. The order of the variants rotates from round to round.
Ratios are per round (time / dense time of the same
round), summarised as median [min-max]. CPU: per-call thread-CPU time (robust to time-slicing on a shared machine),
one thread by default; the ISA torch dispatches to is recorded (set ``ATEN_CPU_CAPABILITY=avx2`` and
``ONEDNN_MAX_CPU_ISA=AVX2`` to emulate an AVX2 machine on an AVX-512 one).

    python packages/teal/benchmarks/bench_teal_forward.py --out forward_cpu.json
    python packages/teal/benchmarks/bench_teal_forward.py --device cuda --quick --out forward_gpu.json
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
from iclr25.teal.modules import find_blocks
from iclr25.teal.small_model import SmallModelConfig, build_model

GPU_ARGS = ["--device", "cuda", "--quick"]
MID = SmallModelConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4, num_attention_heads=16,
                       num_key_value_heads=4, max_position_embeddings=512)  # fmt: skip
SHAPES = {"prefill_1x64": (1, 64), "steps_8x1": (8, 1)}
SPARSITY = 0.5


def _shared_copy(model):
    """A deep copy of ``model`` that shares its parameter tensors (buffers are copied)."""
    return copy.deepcopy(model, memo={id(p): p for p in model.parameters()})


def _old_layout(model):
    """A dense copy whose projection weights are column-major (each input channel's weights contiguous)."""
    twin = _shared_copy(model)
    with torch.no_grad():
        for b in find_blocks(twin):
            for p in b.parents:
                lin = b.module(p)
                lin.weight = torch.nn.Parameter(lin.weight.t().contiguous().t(), requires_grad=False)
    return twin


def _timer(device):
    if device == "cuda":

        def run(fn):
            torch.cuda.synchronize()
            t = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            return time.perf_counter() - t

        return run

    def run(fn):
        t = time.thread_time()
        fn()
        return time.thread_time() - t

    return run


@torch.no_grad()
def run_dtype(dtype, device, repeats, shapes, old_layout=True):
    model = build_model("llama", MID, seed=0).to(dtype).to(device).eval()
    g = torch.Generator().manual_seed(0)
    calib = calibrate(model, [torch.randint(0, MID.vocab_size, (2, 128), generator=g).to(device)])
    variants = {"dense": model}
    handles = []
    for name, backend in (("teal_auto", "auto"), ("teal_torch", "torch")):
        twin = _shared_copy(model)
        handles.append(apply_teal(twin, calib, SparsityPlan.uniform(SPARSITY), backend=backend))
        variants[name] = twin
    if old_layout:
        variants["old_layout"] = _old_layout(model)
    inputs = {k: torch.randint(0, MID.vocab_size, s, generator=g).to(device) for k, s in SHAPES.items() if k in shapes}
    # the TEAL forwards compute what the reference computes (a check, not a timing)
    for k, ids in inputs.items():
        ref = variants["dense"](input_ids=ids, use_cache=False).logits
        for name in ("teal_auto", "teal_torch"):
            assert torch.isfinite(variants[name](input_ids=ids, use_cache=False).logits).all(), (name, k)
        if old_layout:
            old = variants["old_layout"](input_ids=ids, use_cache=False).logits.float()
            rel = float((old - ref.float()).norm() / ref.float().norm())
            assert rel < 5e-2, f"the column-major copy computes another function ({k}: relative error {rel:.3g})"
    clock = _timer(device)
    times = {(k, v): [] for k in inputs for v in variants}
    names = list(variants)
    for r in range(repeats + 1):  # round 0 is the warm-up
        order = names[r % len(names) :] + names[: r % len(names)]  # rotated: no variant always runs first
        for k, ids in inputs.items():
            for v in order:
                dt = clock(lambda m=variants[v], ids=ids: m(input_ids=ids, use_cache=False))
                if r > 0:
                    times[(k, v)].append(dt)
    rows = []
    for k in inputs:
        dense = times[(k, "dense")]
        row = {"input": k, "shape": list(SHAPES[k]), "dtype": str(dtype).replace("torch.", ""),
               "dense_s": summarize(dense)}  # fmt: skip
        for v in variants:
            if v != "dense":
                row[f"{v}_s"] = summarize(times[(k, v)])
                row[f"{v}_vs_dense"] = ratio_summary(times[(k, v)], dense)  # > 1: slower than dense
        rows.append(row)
        print(
            f"{row['dtype']:>8} {k:<13} dense {row['dense_s']['median'] * 1e3:8.1f} ms | time / dense: "
            + " ".join(f"{v} {fmt_spread(row[f'{v}_vs_dense'])}" for v in variants if v != "dense"),
            flush=True,
        )
    extra = {name: h.extra_bytes() for name, h in zip(("teal_auto", "teal_torch"), handles)}
    weight_bytes = sum(b.module(p).weight.numel() * b.module(p).weight.element_size()
                       for b in find_blocks(model) for p in b.parents)  # fmt: skip
    for h in handles:
        h.remove()
    return rows, {"projection_weight_bytes": weight_bytes, "extra_bytes": extra}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="bench_teal_forward.json")
    p.add_argument("--repeats", type=int, default=5, help="interleaved timed rounds (after one warm-up round)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="the 64-token forward only, 3 rounds")
    p.add_argument("--no-old-layout", action="store_true", help="skip the column-major baseline (slow on AVX2)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: forward benchmark skipped")
        return 0
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    shapes = ["prefill_1x64"] if args.quick else list(SHAPES)
    rows, memory = [], {}
    for dtype in (torch.float32, torch.bfloat16):
        r, mem = run_dtype(dtype, args.device, repeats, shapes, old_layout=not args.no_old_layout)
        rows += r
        memory[str(dtype).replace("torch.", "")] = mem
    params = {"device": args.device, "model": "random Llama hidden 2048, 4 layers, 0.18 B", "sparsity": SPARSITY,
              "prefill": "last_half", "repeats": repeats, "warmup_rounds": 1, "interleaved": True,
              "clock": "thread_time" if args.device == "cpu" else "cuda-synchronised wall time"}  # fmt: skip
    if args.device == "cpu":
        params.update(cpu_environment())
    write_result(args.out, {"name": "teal_forward", "params": params, "figures": {"rows": rows, "memory": memory}})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
