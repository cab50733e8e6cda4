"""Batched bias-free SVM solves (what enumeration needs): Triton kernel vs the torch reference on GPU, and the
torch path vs one-problem-at-a-time cvxpy (Clarabel) on CPU, the baseline a user would otherwise write.

    PYTHONPATH=packages/shared/src:packages/qpcert/src python packages/qpcert/benchmarks/bench_box_qp.py
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import numpy as np
import torch

from iclr25.qpcert.kernels import box_qp
from iclr25.qpcert.svm import solve_batch
from iclr25.shared import benchmark, write_result


def problem(b: int, m: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, 6, generator=g, dtype=torch.float64)
    q = x @ x.T + 0.01 * torch.eye(m, dtype=torch.float64)
    y = torch.where(torch.rand(b, m, generator=g) < 0.5, -1.0, 1.0).double()
    return q.to(device), y.to(device)


def cvxpy_per_problem(q: np.ndarray, ys: np.ndarray, c: float) -> None:
    import cvxpy as cp

    m = q.shape[0]
    for y in ys:
        p = (y[:, None] * y[None, :]) * q
        w, v = np.linalg.eigh(p)
        root = v * np.sqrt(np.clip(w, 0, None))
        a = cp.Variable(m)
        cp.Problem(cp.Minimize(0.5 * cp.sum_squares(root.T @ a) - cp.sum(a)), [a >= 0, a <= c]).solve("CLARABEL")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("results") / "bench_box_qp.json"))
    ap.add_argument("--m", type=int, default=20)
    args = ap.parse_args(argv)
    c, m = 1.0, args.m
    figures, params = {}, {"m": m, "C": c}
    q, y = problem(256, m, "cpu")
    t_batch = benchmark(lambda: solve_batch(q, y, c), warmup=1, repeat=3).median
    try:
        import cvxpy  # noqa: F401

        t_cvx = benchmark(lambda: cvxpy_per_problem(q.numpy(), y[:32].numpy(), c), warmup=0, repeat=1).median * 8
        figures["cpu_cvxpy_over_batched_torch_256_problems"] = t_cvx / t_batch
    except ImportError:
        pass
    figures["cpu_batched_exact_seconds_per_problem"] = t_batch / 256
    if torch.cuda.is_available():
        for b in (4096, 65536):
            qg, yg = problem(b, m, "cuda")
            a0 = torch.zeros_like(yg)
            t_tri = benchmark(functools.partial(box_qp, qg, yg, a0, c, 20, backend="triton")).median
            t_ref = benchmark(functools.partial(box_qp, qg, yg, a0, c, 20, backend="torch")).median
            figures[f"gpu_torch_over_triton_B{b}"] = t_ref / t_tri
            a_t, _ = box_qp(qg, yg, a0, c, 20, backend="triton")
            a_r, _ = box_qp(qg, yg, a0, c, 20, backend="torch")
            figures[f"gpu_max_abs_diff_B{b}"] = float((a_t - a_r).abs().max())
    else:
        params["gpu"] = "skipped: no CUDA device"
    record = {"name": "qpcert_batched_box_qp", "params": params, "figures": figures}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, record)
    print(figures)
    return record


if __name__ == "__main__":
    main()
