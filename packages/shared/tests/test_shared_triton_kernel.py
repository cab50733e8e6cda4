"""A tiny Triton kernel run through the plugin: proves the interpreter mechanism end to end on CPU."""

import pytest
import torch

from iclr25.shared import autotune_configs, ensure_contiguous, next_power_of_2, resolve_backend
from iclr25.shared.testing import KernelConformance

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.autotune(configs=autotune_configs([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})]), key=["n"])
@triton.jit
def _scaled_square_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (scale * x * x).to(y_ptr.dtype.element_ty), mask=mask)


@ensure_contiguous
def scaled_square_triton(x: torch.Tensor, scale: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    _scaled_square_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, scale)
    return y


class _ScaledSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return scaled_square_triton(x, scale)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.0 * ctx.scale * x * g, None


def scaled_square_reference(x, scale):
    return scale * x * x


def scaled_square(x, scale, backend="auto"):
    if resolve_backend(x, backend) == "triton":
        return _ScaledSquare.apply(x, scale)
    return scaled_square_reference(x, scale)


@pytest.mark.triton
def test_interpreted_kernel_equals_torch():
    x = torch.randn(1151)
    torch.testing.assert_close(scaled_square(x, 0.5, backend="triton"), 0.5 * x * x)


def test_autotune_configs_keeps_one_config_when_interpreting(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert autotune_configs([1, 2, 3]) == [1]
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert autotune_configs([1, 2, 3]) == [1, 2, 3]
    with pytest.raises(ValueError):
        autotune_configs([])


@pytest.mark.parametrize("n,expected", [(0, 1), (1, 1), (2, 2), (3, 4), (17, 32), (1024, 1024), (11008, 16384)])
def test_next_power_of_2(n, expected):
    assert next_power_of_2(n) == expected


def test_ensure_contiguous():
    seen = {}

    @ensure_contiguous
    def f(a, b=None):
        seen["a"], seen["b"] = a.is_contiguous(), b.is_contiguous()
        return a

    x = torch.randn(4, 5).t()
    assert not x.is_contiguous()
    f(x, b=x)
    assert seen == {"a": True, "b": True}


class TestScaledSquareConformance(KernelConformance):
    shapes = [(1,), (5, 123), (63,), (3, 7, 11)]
    dtypes = (torch.float32, torch.float16)
    differentiable = True

    def make_inputs(self, shape, dtype, device):
        return (torch.randn(*shape, device=device).to(dtype).requires_grad_(True), 1.5)

    def reference(self, x, scale):
        return scaled_square_reference(x, scale)

    def kernel(self, x, scale):
        return scaled_square(x, scale, backend="triton")

    def dispatch(self, x, scale):
        return scaled_square(x, scale)


def test_conformance_catches_a_wrong_kernel():
    class Wrong(TestScaledSquareConformance):
        def kernel(self, x, scale):
            return scaled_square(x, scale, backend="triton") * 1.01

    with pytest.raises(AssertionError, match="relative RMS"):
        Wrong().test_forward_matches_reference()


def test_conformance_catches_unwritten_output():
    class Unwritten(TestScaledSquareConformance):
        def kernel(self, x, scale):
            y = torch.empty_like(x)
            y[..., :1] = scale * x[..., :1] ** 2  # leaves the rest unwritten
            return y

    with pytest.raises(AssertionError, match="NaN"):
        Unwritten().test_forward_matches_reference()
