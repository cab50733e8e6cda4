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


POISONS = (float("nan"), float("inf"))


def _poisoned(w, inactive_cols, value, rows=slice(None)):
    """``w`` with ``value`` written into the given rows of the inactive input channels' columns, and a clean copy
    (zeros there: what a kernel that never reads them must produce)."""
    poisoned, clean = w.clone(), w.clone()
    idx = torch.nonzero(inactive_cols).squeeze(1)
    poisoned[rows, idx] = value
    clean[rows, idx] = 0
    return poisoned, clean


@pytest.mark.parametrize("poison", POISONS, ids=["nan", "inf"])
@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inactive_weight_columns_are_never_read(backend, dtype, poison):
    x, w = _inputs((200, 90), dtype, _dev(backend), seed=4)
    inactive = x.float().abs() <= THRESHOLD  # compared in fp32, as the kernels do
    assert 0 < int(inactive.sum()) < 90
    poisoned, clean = _poisoned(w, inactive, poison)
    # the mask-then-dense reference reads them (0 * NaN = 0 * inf = NaN): the test can tell the difference
    assert torch.isnan(sparse_gemv(x, poisoned, THRESHOLD, backend="reference")).all()
    for layout in (prepare_weight(poisoned), poisoned):
        out = sparse_gemv(x, layout, THRESHOLD, backend=backend)
        assert torch.isfinite(out).all()
        assert_close_ratio(_ref64(x, clean, THRESHOLD), out, ratio=TOL[dtype][0], atol=TOL[dtype][1])


# -- a kept mutant: the Triton kernel with the weight-load mask widened --------------------------------------------------
def _mutant_kernel():
    """The split-K kernel with one change: the weight tile is loaded for every row (MUTATION=0) or for the rows active
    for any of q/k/v (MUTATION=1), while the products still use only the active inputs. Its outputs equal the
    reference on clean weights, so only a poison test that sees loaded values can catch it."""
    import triton
    import triton.language as tl

    from iclr25.shared import autotune_configs
    from iclr25.teal.kernels.splitk_sparse_gemv import _CONFIGS

    @triton.autotune(configs=autotune_configs(_CONFIGS), key=["N", "K", "QKV", "HAS_SCALE"], reset_to_zero=["out_ptr"])
    @triton.jit
    def mutant(x_ptr, w_ptr, t_q, t_k, t_v, scale_ptr, out_ptr, N, K, stride_wn, stride_wk, bound_q, bound_k,
               QKV: tl.constexpr, HAS_SCALE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               MUTATION: tl.constexpr = 0):  # fmt: skip
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
        n_ok = rn < N
        k_ok = rk < K
        x = tl.load(x_ptr + rk, mask=k_ok, other=0.0).to(tl.float32)
        ax = tl.abs(x)
        nan = x != x
        if QKV:
            t_n = tl.where(rn < bound_q, t_q, tl.where(rn < bound_k, t_k, t_v))
            active = ((ax[:, None] > t_n[None, :]) | nan[:, None]) & k_ok[:, None] & n_ok[None, :]
        else:
            active = (((ax > t_q) | nan) & k_ok)[:, None] & n_ok[None, :]
        if MUTATION == 0:
            load = k_ok[:, None] & n_ok[None, :]  # every row
        else:
            t_min = tl.minimum(t_q, tl.minimum(t_k, t_v))
            load = (((ax > t_min) | nan) & k_ok)[:, None] & n_ok[None, :]  # rows active for any block
        w = tl.load(w_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn, mask=load, other=0.0).to(tl.float32)
        xs = tl.where(active, x[:, None], 0.0)
        acc = tl.sum(xs * w, axis=0)
        if HAS_SCALE:
            acc = acc * tl.load(scale_ptr + rn, mask=n_ok, other=0.0)
        tl.atomic_add(out_ptr + rn, acc, mask=n_ok)

    return mutant


def _launchers(mutation=None):
    """(single, qkv, int8) entry points of the real kernel, or of the mutant with the given MUTATION."""
    import functools

    from iclr25.teal.kernels import splitk_sparse_gemv as sk

    if mutation is None:
        kern = None
    else:
        base = _mutant_kernel()

        class _Bound:  # passes MUTATION as a constexpr keyword through the autotuner
            def __getitem__(self, grid):
                return functools.partial(base[grid], MUTATION=mutation)

        kern = _Bound()
    return (
        lambda x, w, t: sk._launch(x, w, [t], None, None, kernel=kern).to(w.dtype),
        lambda x, w, ts, sizes: sk._launch(x, w, list(ts), None, (sizes[0], sizes[0] + sizes[1]), kernel=kern),
        lambda x, q, scales, t: sk._launch(x, q, [t], scales, None, kernel=kern),
    )


def _single_poison_check(gemv, poison, dtype=torch.float32):
    x, w = _inputs((70, 45), dtype, _dev("triton"), seed=8)
    inactive = x.float().abs() <= THRESHOLD  # compared in fp32, as the kernels do
    poisoned, clean = _poisoned(prepare_weight(w), inactive, poison)
    out = gemv(x, prepare_weight(poisoned), THRESHOLD)
    assert torch.isfinite(out).all(), "the kernel loaded weight rows of inactive input channels"
    assert_close_ratio(_ref64(x, clean, THRESHOLD), out, ratio=TOL[dtype][0], atol=TOL[dtype][1])


def _qkv_per_block_poison_check(qkv, poison):
    """q/k/v with t_q < t_k < t_v: a channel with t_q < |x| <= t_k is active for q only, so its W_k and W_v entries
    are poisoned (W_q's are not), and channels inactive for q are poisoned in all three blocks."""
    x, w = _inputs((30 + 15 + 15, 80), torch.float32, _dev("triton"), seed=9)
    ts, sizes = (0.4, 1.0, 1.3), (30, 15, 15)
    a = x.abs()
    poisoned, clean = w.clone(), w.clone()
    for (lo, hi), t in zip(((0, 30), (30, 45), (45, 60)), ts):
        cols = torch.nonzero(a <= t).squeeze(1)
        poisoned[lo:hi, cols] = poison
        clean[lo:hi, cols] = 0
    only_q = (a > ts[0]) & (a <= ts[1])
    assert int(only_q.sum()) > 3  # the per-block case is exercised
    out = qkv(x, prepare_weight(poisoned), ts, sizes)
    assert torch.isfinite(out).all(), "the kernel loaded a row inactive for its q/k/v block"
    ref = sparse_qkv_gemv_reference(x.double(), clean.double(), ts, sizes)
    assert_close_ratio(ref, out, ratio=1e-5, atol=1e-5)


@pytest.mark.triton
@pytest.mark.parametrize("poison", POISONS, ids=["nan", "inf"])
def test_triton_poison_tests_kill_the_mutant(poison):
    single, qkv, _ = _launchers()
    _single_poison_check(single, poison)
    _single_poison_check(single, poison, torch.bfloat16)
    _qkv_per_block_poison_check(qkv, poison)
    _single_poison_check(lambda x, w, t: sparse_gemv(x, w, t, backend="triton"), poison)  # through the dispatcher
    _qkv_per_block_poison_check(lambda *a: sparse_qkv_gemv(*a, backend="triton"), poison)
    m_single, m_qkv, _ = _launchers(mutation=0)
    x, w = _inputs((70, 45), torch.float32, _dev("triton"), seed=8)
    assert_close_ratio(_ref64(x, w, THRESHOLD), m_single(x, prepare_weight(w), THRESHOLD), 1e-5, 1e-5)  # clean: right
    with pytest.raises(AssertionError, match="inactive input channels"):
        _single_poison_check(m_single, poison)
    with pytest.raises(AssertionError, match="inactive for its q/k/v block"):
        _qkv_per_block_poison_check(m_qkv, poison)
    _, m_union, _ = _launchers(mutation=1)  # loads the union of the three blocks' active rows
    with pytest.raises(AssertionError, match="inactive for its q/k/v block"):
        _qkv_per_block_poison_check(m_union, poison)


def _loaded_addresses(monkeypatch):
    """Record every address the Triton interpreter loads with its mask on (int8 cannot hold a NaN poison)."""
    from triton.runtime import interpreter

    if not hasattr(interpreter.InterpreterBuilder, "create_masked_load"):
        pytest.skip("this Triton interpreter has no create_masked_load to instrument")
    seen = []
    original = interpreter.InterpreterBuilder.create_masked_load

    def recording(self, ptrs, mask, other, *args, **kwargs):
        seen.append(ptrs.data[mask.data.astype(bool)].ravel().astype("int64").copy())
        return original(self, ptrs, mask, other, *args, **kwargs)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", recording)
    return seen


def _element_addresses(t, rows, cols):
    """Byte addresses of t[rows][:, cols]."""
    r = torch.as_tensor(rows)[:, None]
    c = torch.as_tensor(cols)[None, :]
    return (t.data_ptr() + (r * t.stride(0) + c * t.stride(1)) * t.element_size()).reshape(-1)


@pytest.mark.triton
def test_int8_kernel_never_loads_inactive_rows_and_the_mutant_does(monkeypatch):
    if CUDA:
        pytest.skip("load recording needs the Triton interpreter (CPU)")
    x, w = _inputs((50, 40), torch.float32, "cpu", seed=10)
    q = Int8Weight.quantize(w)
    inactive = torch.nonzero(x.abs() <= THRESHOLD).squeeze(1)
    active = torch.nonzero(x.abs() > THRESHOLD).squeeze(1)
    bad = set(_element_addresses(q.qweight, torch.arange(50), inactive).tolist())
    good = set(_element_addresses(q.qweight, torch.arange(50), active).tolist())
    ref = sparse_gemv_int8_reference(x, q.qweight, q.scales, THRESHOLD)
    for mutation, expect_bad in ((None, False), (0, True)):
        seen = _loaded_addresses(monkeypatch)
        out = _launchers(mutation)[2](x, q.qweight, q.scales, THRESHOLD)
        assert_close_ratio(ref, out, ratio=1e-5, atol=1e-5)  # the mutant's output is right: only its loads differ
        loaded = set(torch.from_numpy(__import__("numpy").concatenate(seen)).tolist())
        assert good <= loaded  # the recorder sees the weight loads
        assert bool(loaded & bad) == expect_bad
        monkeypatch.undo()


@pytest.mark.parametrize("backend", ["reference", "torch", pytest.param("triton", marks=pytest.mark.triton)])
def test_nan_input_propagates_like_the_reference(backend):
    x, w = _inputs((33, 20), torch.float32, _dev(backend), seed=11)
    x[3] = float("nan")
    ref = sparse_gemv_reference(x.cpu(), w.cpu(), THRESHOLD)  # x * 1[|x| > t]: NaN * 0 = NaN
    assert torch.isnan(ref).all()
    assert torch.isnan(sparse_gemv(x, prepare_weight(w), THRESHOLD, backend=backend)).all()
    assert torch.isnan(sparse_qkv_gemv(x, w, (0.1, 0.5, 0.9), (11, 11, 11), backend=backend)).all()
    q = Int8Weight.quantize(w)
    assert torch.isnan(sparse_gemv_int8(x, q, THRESHOLD, backend=backend)).all()
    x[3] = 0.0
    assert torch.isfinite(sparse_gemv(x, w, THRESHOLD, backend=backend)).all()


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_threshold_comparison_in_the_input_dtype_equals_the_fp32_comparison(dtype):
    """The torch paths compare |x| in x's own dtype (fast, fused ``hardshrink``); the kernels compare in fp32. The two
    must agree on every value, including values one ulp either side of t and thresholds that round up in bf16/fp16."""
    import math
    import random

    from iclr25.teal.kernels.reference import active_mask, compare_threshold, sparsify_input

    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    specials = [0.0, math.inf, 0.502, 65504.0, 65519.0, 65520.0, 1e39, 3.4e38, 1e-30]
    for t in specials + [10 ** rng.uniform(-9, 6) for _ in range(200)]:
        x = torch.randn(300, generator=g, dtype=torch.float64) * (t if 0 < t < math.inf else 1.0)
        x = torch.cat([x, torch.tensor([t, -t, math.nextafter(t, 0.0), math.nextafter(t, math.inf), math.nan])])
        x = x.to(dtype)
        t32 = float(torch.tensor(t, dtype=torch.float32))  # what the Triton kernel receives
        expected = ~(x.float().abs() <= t32)
        assert torch.equal(active_mask(x, t), expected), (t, compare_threshold(t, dtype))
        s = sparsify_input(x, t)
        assert torch.equal(torch.isnan(s), torch.isnan(x))
        assert torch.equal(s[~torch.isnan(x)], torch.where(expected, x, torch.zeros((), dtype=dtype))[~torch.isnan(x)])
    # a bf16 value just above t must stay active although t rounds up to it in bf16 (0.502 -> 0.50390625)
    x = torch.tensor([0.50390625, 0.5], dtype=torch.bfloat16)
    assert active_mask(x, 0.502).tolist() == [True, False]
