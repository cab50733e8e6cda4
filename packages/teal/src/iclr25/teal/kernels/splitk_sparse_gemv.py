"""Triton split-K sparse GEMV for TEAL decode: y = W (x * 1[|x| > t]), weight columns of inactive channels unread.

One kernel serves three entry points (references in ``kernels/reference.py``): ``sparse_gemv`` (one threshold;
``sparse_gemv_reference``), ``sparse_qkv_gemv`` (stacked W_q/W_k/W_v, the threshold chosen per output column;
``sparse_qkv_gemv_reference``) and ``sparse_gemv_int8`` (int8 weights, per-output-channel scales applied to each
partial sum; ``sparse_gemv_int8_reference``).

Grid (ceil(N / BLOCK_N), ceil(K / BLOCK_K)): program (n, k) loads x[k-block], forms the mask |x| > t in-kernel,
loads the BLOCK_K x BLOCK_N weight tile with that mask (rows of inactive channels are never fetched) and with the
output-bounds mask (no out-of-bounds reads for sizes such as 11008), accumulates in fp32 and atomically adds its
partial sum into an fp32 workspace (which also sidesteps fp16/bf16 atomics); the launcher casts at the end.
Strides are honoured, so any layout works; the column-major layout (``W^T`` contiguous) makes each active channel one
contiguous, coalesced row. Inference only (no backward): TEAL is training-free.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import autotune_configs

_CONFIGS = [
    triton.Config({"BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4),  # first config: the one used under the interpreter
    triton.Config({"BLOCK_N": 256, "BLOCK_K": 16}, num_warps=4),
    triton.Config({"BLOCK_N": 256, "BLOCK_K": 32}, num_warps=4),
    triton.Config({"BLOCK_N": 256, "BLOCK_K": 64}, num_warps=4),
    triton.Config({"BLOCK_N": 512, "BLOCK_K": 16}, num_warps=4),
    triton.Config({"BLOCK_N": 512, "BLOCK_K": 32}, num_warps=8),
    triton.Config({"BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4),
    triton.Config({"BLOCK_N": 64, "BLOCK_K": 128}, num_warps=4),
    triton.Config({"BLOCK_N": 1024, "BLOCK_K": 16}, num_warps=8),
]


@triton.autotune(configs=autotune_configs(_CONFIGS), key=["N", "K", "QKV", "HAS_SCALE"], reset_to_zero=["out_ptr"])
@triton.jit
def _sparse_gemv_kernel(
    x_ptr,
    w_ptr,
    t_q,
    t_k,
    t_v,
    scale_ptr,
    out_ptr,
    N,
    K,
    stride_wn,
    stride_wk,
    bound_q,
    bound_k,
    QKV: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    n_ok = rn < N
    k_ok = rk < K
    x = tl.load(x_ptr + rk, mask=k_ok, other=0.0).to(tl.float32)
    ax = tl.abs(x)
    nan = x != x  # NaN inputs are active, so they propagate as in the reference x * 1[|x| > t]
    if QKV:  # the threshold of each output column: t_q, t_k or t_v by its block
        t_n = tl.where(rn < bound_q, t_q, tl.where(rn < bound_k, t_k, t_v))
        active = ((ax[:, None] > t_n[None, :]) | nan[:, None]) & k_ok[:, None] & n_ok[None, :]
    else:
        active = (((ax > t_q) | nan) & k_ok)[:, None] & n_ok[None, :]
    # Only active weight entries are loaded; the loaded values are used as they are (no select on them afterwards),
    # so a kernel that fetched an inactive row would let a NaN/inf written there reach the output (tested).
    w = tl.load(w_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn, mask=active, other=0.0).to(tl.float32)
    xs = tl.where(active, x[:, None], 0.0)  # inactive inputs contribute exactly 0 (also when x = inf and t = inf)
    acc = tl.sum(xs * w, axis=0)
    if HAS_SCALE:
        acc = acc * tl.load(scale_ptr + rn, mask=n_ok, other=0.0)
    tl.atomic_add(out_ptr + rn, acc, mask=n_ok)


def _launch(x, weight, thresholds, scales, qkv_bounds, kernel=None):
    """Run ``kernel`` (default: ``_sparse_gemv_kernel``; tests pass a mutant with the same signature)."""
    if x.dim() != 1:
        raise ValueError(f"x must be one token [in], got shape {tuple(x.shape)}")
    n, k = weight.shape
    if x.numel() != k:
        raise ValueError(f"x has {x.numel()} features but the weight expects {k}")
    out = torch.zeros(n, dtype=torch.float32, device=x.device)
    ts = [float(t) for t in thresholds] * (3 if len(thresholds) == 1 else 1)  # scalars: no host-to-device copy
    x = x.contiguous()
    scale_arg = scales if scales is not None else out  # unused pointer when HAS_SCALE is False
    bq, bk = qkv_bounds if qkv_bounds is not None else (n, n)

    def grid(meta):
        return (triton.cdiv(n, meta["BLOCK_N"]), triton.cdiv(k, meta["BLOCK_K"]))

    (kernel or _sparse_gemv_kernel)[grid](
        x,
        weight,
        ts[0],
        ts[1],
        ts[2],
        scale_arg,
        out,
        n,
        k,
        weight.stride(0),
        weight.stride(1),
        bq,
        bk,
        QKV=qkv_bounds is not None,
        HAS_SCALE=scales is not None,
    )
    return out


@torch.library.custom_op("iclr25_teal::sparse_gemv", mutates_args=())
def _sparse_gemv_op(x: torch.Tensor, weight: torch.Tensor, threshold: float) -> torch.Tensor:
    """The single-threshold kernel as an opaque custom op, so ``torch.compile``/CUDA graphs can capture decode."""
    return _launch(x, weight, [threshold], None, None).to(weight.dtype)


@_sparse_gemv_op.register_fake
def _(x, weight, threshold):
    return weight.new_empty(weight.shape[0])


def sparse_gemv_triton(
    x: torch.Tensor, weight: torch.Tensor, threshold: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Triton sparse GEMV; returns the weight dtype (fp32 accumulation)."""
    y = _sparse_gemv_op(x, weight, float(threshold))
    return y if bias is None else y + bias


def sparse_qkv_gemv_triton(
    x: torch.Tensor, weight_qkv: torch.Tensor, thresholds: tuple[float, float, float], sizes: tuple[int, int, int]
) -> torch.Tensor:
    """Triton fused q/k/v sparse GEMV over the stacked weight (one launch, three thresholds)."""
    bounds = (sizes[0], sizes[0] + sizes[1])
    return _launch(x, weight_qkv, [float(t) for t in thresholds], None, bounds).to(weight_qkv.dtype)


def sparse_gemv_int8_triton(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, threshold: float):
    """Triton int8-weight sparse GEMV with per-output-channel scales; returns fp32."""
    return _launch(x, qweight, [float(threshold)], scales.to(torch.float32).contiguous(), None)
