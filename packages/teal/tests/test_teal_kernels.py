"""Sparse GEMV kernels vs their references: odd shapes, t = 0 / typical / inf, fp32/fp16/bf16, int8, fused qkv;
column skipping proven with NaN-poisoned inactive columns (a mask-then-dense implementation cannot pass)."""

from __future__ import annotations

import pytest
import torch

from iclr25.shared.testing import KernelConformance, assert_close_ratio
from iclr25.teal.kernels import (
    Int8Weight,
    prepare_weight,
    sparse_gemv,
    sparse_gemv_int8,
    sparse_gemv_int8_reference,
    sparse_gemv_reference,
    sparse_qkv_gemv,
    sparse_qkv_gemv_reference,
)

TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (5e-3, 1e-3), torch.bfloat16: (2e-2, 1e-2)}
THRESHOLD = 0.6  # ~45 % of N(0, 1) entries inactive
CUDA = torch.cuda.is_available()


def _dev(backend: str) -> str:
    """Triton runs on CUDA tensors when a GPU is present, else on CPU tensors under the interpreter."""
    return "cuda" if backend == "triton" and CUDA else "cpu"


def _inputs(shape, dtype, device="cpu", seed=0):
    n, k = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(k, generator=g).to(dtype).to(device)
    w = torch.randn(n, k, generator=g).to(dtype).to(device)
    return x, w


def _ref64(x, w, t, bias=None):
    return sparse_gemv_reference(x.double(), w.double(), t, None if bias is None else bias.double())


class TestSparseGemvTriton(KernelConformance):
    shapes = [(1, 1), (300, 500), (129, 257), (1000, 77)]
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    tolerances = TOL

    def make_inputs(self, shape, dtype, device):
        x, w = _inputs(shape, dtype, device)
        return x, w, THRESHOLD

    def reference(self, x, w, t):
        return _ref64(x, w, t).to(w.dtype)

    def kernel(self, x, w, t):
        return sparse_gemv(x, w, t, backend="triton")

    def dispatch(self, x, w, t):
        return sparse_gemv(x, w, t)


class TestSparseQkvGemvTriton(KernelConformance):
    shapes = [(3, 1), (24 + 8 + 8, 50), (130 + 66 + 66, 97)]  # (rows of q + k + v, in)
    dtypes = (torch.float32, torch.bfloat16)
    tolerances = TOL

    def _sizes(self, n):
        return (1, 1, 1) if n == 3 else ((24, 8, 8) if n == 40 else (130, 66, 66))

    def make_inputs(self, shape, dtype, device):
        x, w = _inputs(shape, dtype, device, seed=1)
        return x, w, (0.3, 0.8, 1.4), self._sizes(shape[0])

    def reference(self, x, w, ts, sizes):
        return sparse_qkv_gemv_reference(x.double(), w.double(), ts, sizes).to(w.dtype)

    def kernel(self, x, w, ts, sizes):
        return sparse_qkv_gemv(x, w, ts, sizes, backend="triton")

    def dispatch(self, x, w, ts, sizes):
        return sparse_qkv_gemv(x, w, ts, sizes)


class TestSparseGemvInt8Triton(KernelConformance):
    shapes = [(1, 1), (37, 50), (300, 129)]
    dtypes = (torch.float32,)

    def make_inputs(self, shape, dtype, device):
        x, w = _inputs(shape, torch.float32, device, seed=2)
        q = Int8Weight.quantize(w)
        return x, q.qweight, q.scales, THRESHOLD

    def reference(self, x, q, scales, t):
        return sparse_gemv_int8_reference(x, q, scales, t)

    def kernel(self, x, q, scales, t):
        return sparse_gemv_int8(x, Int8Weight(q, scales), t, backend="triton")

    def dispatch(self, x, q, scales, t):
        return sparse_gemv_int8(x, Int8Weight(q, scales), t)


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
@pytest.mark.parametrize("t", [0.0, THRESHOLD, float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_edge_thresholds(backend, t, dtype):
    x, w = _inputs((129, 75), dtype, _dev(backend))
    bias = torch.randn(129).to(dtype).to(x.device)
    for layout in (w, prepare_weight(w)):
        out = sparse_gemv(x, layout, t, bias=bias, backend=backend)
        assert out.dtype == dtype and out.shape == (129,)
        ratio, atol = TOL[dtype]
        assert_close_ratio(_ref64(x, w, t, bias), out, ratio=ratio, atol=atol)
        if t == float("inf"):
            assert torch.equal(out.cpu(), bias.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_torch_backend_on_a_llama_sized_odd_matrix(dtype):
    x, w = _inputs((4099, 2753), dtype, seed=3)
    w = prepare_weight(w)
    ratio, atol = TOL[dtype]
    for t in (0.0, 0.3, THRESHOLD, 2.0):
        assert_close_ratio(_ref64(x, w, t), sparse_gemv(x, w, t, backend="torch"), ratio=ratio, atol=atol)


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inactive_weight_columns_are_never_read(backend, dtype):
    x, w = _inputs((200, 90), dtype, _dev(backend), seed=4)
    inactive = x.abs() <= THRESHOLD
    assert 0 < int(inactive.sum()) < 90
    poisoned = w.clone()
    poisoned[:, inactive] = float("nan")
    clean = w.clone()
    clean[:, inactive] = 0
    # the mask-then-dense reference reads them (0 * NaN = NaN): the test can tell the difference
    assert torch.isnan(sparse_gemv(x, poisoned, THRESHOLD, backend="reference")).all()
    for layout in (prepare_weight(poisoned), poisoned):
        out = sparse_gemv(x, layout, THRESHOLD, backend=backend)
        assert torch.isfinite(out).all()
        assert_close_ratio(_ref64(x, clean, THRESHOLD), out, ratio=TOL[dtype][0], atol=TOL[dtype][1])


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
def test_int8_and_qkv_skip_inactive_columns(backend):
    x, w = _inputs((60, 40), torch.float32, _dev(backend), seed=5)
    q = Int8Weight.quantize(w)
    inactive = x.abs() <= THRESHOLD
    ref = sparse_gemv_int8_reference(x, q.qweight, q.scales, THRESHOLD)
    deq = sparse_gemv_reference(x, q.dequantize(), THRESHOLD)  # int8 variant = dequantize-then-reference
    assert_close_ratio(ref, deq, ratio=1e-6, atol=1e-5)
    assert_close_ratio(ref, sparse_gemv_int8(x, q, THRESHOLD, backend=backend), ratio=1e-5, atol=1e-5)
    poisoned = w.clone()
    poisoned[:, x.abs() <= 1.5] = float("nan")  # inactive for every one of the three thresholds below
    clean = torch.where(torch.isnan(poisoned), torch.zeros_like(w), w)
    ts, sizes = (1.5, 1.6, 1.7), (30, 15, 15)
    out = sparse_qkv_gemv(x, prepare_weight(poisoned), ts, sizes, backend=backend)
    assert_close_ratio(sparse_qkv_gemv_reference(x.double(), clean.double(), ts, sizes), out, ratio=1e-5, atol=1e-5)
    assert inactive.any()


def test_multi_token_inputs_take_the_dense_path():
    g = torch.Generator().manual_seed(6)
    w = torch.randn(33, 21, generator=g)
    x = torch.randn(2, 3, 21, generator=g)
    for backend in ("auto", "torch", "triton", "reference"):  # "triton" never launches here: dense fallback
        out = sparse_gemv(x, w, THRESHOLD, backend=backend)
        assert torch.equal(out, torch.nn.functional.linear(x * (x.abs() > THRESHOLD), w))
    q = Int8Weight.quantize(w)
    assert torch.equal(sparse_gemv_int8(x, q, 0.5), sparse_gemv_int8_reference(x, q.qweight, q.scales, 0.5))
    one = x[:1, :1]  # [1, 1, in]: a single decode token keeps its leading dims
    assert sparse_gemv(one, w, THRESHOLD).shape == (1, 1, 33)


def test_bad_kernel_input():
    x, w = _inputs((5, 4), torch.float32)
    with pytest.raises(ValueError, match="backend"):
        sparse_gemv(x, w, 0.1, backend="cuda")
    with pytest.raises(ValueError, match="threshold"):
        sparse_gemv(x, w, -1.0)
    with pytest.raises(ValueError, match="features"):
        sparse_gemv(torch.randn(3), w, 0.1)
    with pytest.raises(TypeError, match="dtype"):
        sparse_gemv(x.double(), w, 0.1)
    with pytest.raises(ValueError, match="sizes"):
        sparse_qkv_gemv(x, w, (0.1, 0.1, 0.1), (2, 2, 2))
    with pytest.raises(TypeError, match="Int8Weight"):
        sparse_gemv_int8(x, w, 0.1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_triton_on_gpu_large(dtype):
    x, w = _inputs((11008, 4096), dtype, device="cuda", seed=7)
    w = prepare_weight(w)
    for t in (0.0, 0.3, THRESHOLD, float("inf")):
        ratio, atol = TOL[dtype] if dtype != torch.float32 else (1e-4, 1e-4)
        assert_close_ratio(_ref64(x, w, t), sparse_gemv(x, w, t), ratio=ratio, atol=atol)
    q = Int8Weight.quantize(w.float())
    xf = x.float()
    assert_close_ratio(
        sparse_gemv_int8_reference(xf, q.qweight, q.scales, THRESHOLD), sparse_gemv_int8(xf, q, THRESHOLD), 1e-4, 1e-3
    )
