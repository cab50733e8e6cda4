"""Triton kernels vs their torch references on a CUDA device (skips cleanly without one).

- segmental DP, one program per utterance, vs the per-j vectorised torch loop (batch of utterances);
- fused k-means assignment vs ``||x||^2 - 2 x C^T + ||c||^2`` + argmin with K = 24576 centroids;
- block sums of a banded affinity vs the 2-D prefix-sum reference.

    PYTHONPATH=packages/shared/src:packages/syllablelm/src python packages/syllablelm/benchmarks/bench_kernels.py
"""

from __future__ import annotations

import argparse

import torch

from iclr25.shared import benchmark, write_result
from iclr25.syllablelm.kernels import blocksums, kmeans_assign, segmental_dp
from iclr25.syllablelm.segment import sse_costs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_kernels.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: skipping the kernel benchmark")
        return
    dev = "cuda"
    figures = {}
    torch.manual_seed(0)
    # segmental DP: 128 utterances of 10 s (500 frames), at most 100 segments
    costs = sse_costs(torch.randn(128, 500, 64, device=dev), max_len=35, min_len=3).float()
    ref = benchmark(lambda: segmental_dp(costs, 100, exact=False, backend="torch"), warmup=2, repeat=5).median
    tri = benchmark(lambda: segmental_dp(costs, 100, exact=False, backend="triton"), warmup=2, repeat=5).median
    same = torch.equal(segmental_dp(costs, 100, False, "torch")[1], segmental_dp(costs, 100, False, "triton")[1])
    figures["segmental_dp"] = {"torch_s": ref, "triton_s": tri, "speedup": ref / tri, "identical_backpointers": same}
    # k-means assignment
    x = torch.randn(20000, 768, device=dev)
    c = torch.randn(24576, 768, device=dev)
    ref = benchmark(lambda: kmeans_assign(x, c, backend="torch"), warmup=2, repeat=5).median
    tri = benchmark(lambda: kmeans_assign(x, c, backend="triton"), warmup=2, repeat=5).median
    agree = (kmeans_assign(x, c, backend="torch") == kmeans_assign(x, c, backend="triton")).float().mean().item()
    figures["kmeans_assign"] = {"torch_s": ref, "triton_s": tri, "speedup": ref / tri, "agreement": agree}
    # block sums
    a = torch.rand(16, 750, 750, device=dev)
    ref = benchmark(lambda: blocksums(a, 49, backend="torch"), warmup=2, repeat=5).median
    tri = benchmark(lambda: blocksums(a, 49, backend="triton"), warmup=2, repeat=5).median
    figures["blocksums"] = {"torch_s": ref, "triton_s": tri, "speedup": ref / tri}
    for k, v in figures.items():
        print(k, v)
    write_result(
        args.out, {"name": "syllablelm_kernels", "params": {"device": torch.cuda.get_device_name()}, "figures": figures}
    )


if __name__ == "__main__":
    main()
