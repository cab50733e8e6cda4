"""``KernelConformance``: the standard test battery for a kernel against its pure-torch reference.

Subclass it in a test module (the class name must start with ``Test``)::

    class TestMyKernel(KernelConformance):
        shapes = [(1, 1), (5, 123), (63, 17)]          # include size 1 and odd, non-power-of-two sizes
        dtypes = (torch.float32, torch.float16)
        differentiable = True

        def make_inputs(self, shape, dtype, device):   # -> tuple of positional args
            return (torch.randn(*shape, dtype=dtype, device=device, requires_grad=True),)

        def reference(self, x):                        # the pure-torch reference
            return my_kernel_reference(x)

        def kernel(self, x):                           # the Triton path, asked for explicitly
            return my_kernel(x, backend="triton")

Optional hooks: ``dispatch(*args)`` (the public entry point with ``backend="auto"``: on CPU it must agree with the
reference), ``grad_argnums`` (which positional args get gradients checked; default: every floating tensor that
``make_inputs`` created with ``requires_grad=True``), ``tolerances`` ({dtype: (ratio, atol)}), ``make_noncontiguous``.
Every test here carries the ``triton`` marker, so the shared plugin sets up the interpreter on CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from .compare import assert_close_ratio, tolerance


@contextlib.contextmanager
def nan_poison() -> Iterator[None]:
    """Within the block, floating ``torch.empty``/``empty_like``/``Tensor.new_empty`` allocations are filled with NaN,
    so a kernel that leaves part of its output unwritten produces NaN and fails the comparison."""
    import torch

    orig_empty, orig_empty_like, orig_new_empty = torch.empty, torch.empty_like, torch.Tensor.new_empty

    def _poison(t):
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    def empty(*a, **k):
        return _poison(orig_empty(*a, **k))

    def empty_like(*a, **k):
        return _poison(orig_empty_like(*a, **k))

    def new_empty(self, *a, **k):
        return _poison(orig_new_empty(self, *a, **k))

    torch.empty, torch.empty_like, torch.Tensor.new_empty = empty, empty_like, new_empty
    try:
        yield
    finally:
        torch.empty, torch.empty_like, torch.Tensor.new_empty = orig_empty, orig_empty_like, orig_new_empty


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _clone_inputs(args: Sequence[Any]) -> tuple:
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            c = a.detach().clone()
            if a.requires_grad:
                c.requires_grad_(True)
            out.append(c)
        else:
            out.append(a)
    return tuple(out)


def _transpose_copy(a: Any) -> Any:
    """Same values, non-contiguous memory (the last two dims are stored transposed)."""
    import torch

    if not isinstance(a, torch.Tensor) or a.dim() < 2 or a.shape[-1] == 1 or a.shape[-2] == 1:
        return a
    c = a.detach().transpose(-1, -2).contiguous().transpose(-1, -2)
    if a.requires_grad:
        c.requires_grad_(True)
    return c


@pytest.mark.triton
class KernelConformance:
    """Base class; see the module docstring. Not collected itself (its name does not start with ``Test``)."""

    shapes: Sequence[Any] = ()
    dtypes: Sequence[Any] = ()
    differentiable: bool = False
    grad_argnums: Sequence[int] | None = None
    tolerances: dict | None = None
    device: str | None = None  # default: cuda when available, else cpu (interpreter)

    # -- hooks -----------------------------------------------------------------------------------------------------
    def make_inputs(self, shape, dtype, device) -> tuple:  # pragma: no cover - must be overridden
        raise AssertionError(f"{type(self).__name__} must define make_inputs(shape, dtype, device)")

    def reference(self, *args):  # pragma: no cover - must be overridden
        raise AssertionError(f"{type(self).__name__} must define reference(*args)")

    def kernel(self, *args):  # pragma: no cover - must be overridden
        raise AssertionError(f"{type(self).__name__} must define kernel(*args)")

    dispatch = None  # optional: callable(*args) using backend="auto"

    def make_noncontiguous(self, args: tuple) -> tuple:
        return tuple(_transpose_copy(a) for a in args)

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _device(self) -> str:
        import torch

        return self.device or ("cuda" if torch.cuda.is_available() else "cpu")

    def _dtypes(self):
        import torch

        return tuple(self.dtypes) or (torch.float32,)

    def _tol(self, dtype) -> tuple[float, float]:
        if self.tolerances and dtype in self.tolerances:
            return self.tolerances[dtype]
        return tolerance(dtype, self._device())

    def _cases(self):
        if not self.shapes:
            raise AssertionError(f"{type(self).__name__}.shapes is empty: list odd and size-1 shapes to test")
        for dtype in self._dtypes():
            for shape in self.shapes:
                yield shape, dtype

    def _compare(self, ref, out, dtype, what: str) -> None:
        ref, out = _as_tuple(ref), _as_tuple(out)
        assert len(ref) == len(out), f"{what}: kernel returned {len(out)} outputs, reference {len(ref)}"
        ratio, atol = self._tol(dtype)
        for i, (r, o) in enumerate(zip(ref, out)):
            if r is None and o is None:
                continue
            assert r is not None and o is not None, f"{what}[{i}]: one side is None"
            assert_close_ratio(r, o, ratio=ratio, atol=atol, name=f"{what}[{i}]")

    # -- the tests -------------------------------------------------------------------------------------------------
    def test_forward_matches_reference(self):
        for shape, dtype in self._cases():
            args = self.make_inputs(shape, dtype, self._device())
            ref = self.reference(*_clone_inputs(args))
            with nan_poison():
                out = self.kernel(*_clone_inputs(args))
            self._compare(ref, out, dtype, f"forward shape={shape} dtype={dtype}")

    def test_noncontiguous_inputs(self):
        for shape, dtype in self._cases():
            args = self.make_inputs(shape, dtype, self._device())
            ref = self.reference(*_clone_inputs(args))
            out = self.kernel(*self.make_noncontiguous(_clone_inputs(args)))
            self._compare(ref, out, dtype, f"non-contiguous shape={shape} dtype={dtype}")

    def test_backward_matches_reference(self):
        import torch

        if not self.differentiable:
            pytest.skip(f"{type(self).__name__} declares differentiable = False")
        for shape, dtype in self._cases():
            args = self.make_inputs(shape, dtype, self._device())
            argnums = self.grad_argnums
            if argnums is None:
                argnums = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
            assert argnums, f"{type(self).__name__}: no input requires grad; set requires_grad in make_inputs"
            grads = []
            for fn in (self.reference, self.kernel):
                local = _clone_inputs(args)
                outs = [o for o in _as_tuple(fn(*local)) if isinstance(o, torch.Tensor) and o.requires_grad]
                gen = torch.Generator(device="cpu").manual_seed(1234)
                upstream = [torch.randn(o.shape, generator=gen, dtype=torch.float32).to(o) for o in outs]
                torch.autograd.backward(outs, upstream)
                grads.append(tuple(local[i].grad for i in argnums))
            self._compare(grads[0], grads[1], dtype, f"backward shape={shape} dtype={dtype}")

    def test_auto_dispatch_on_cpu_uses_reference(self):
        if self.dispatch is None or self._device() != "cpu":
            pytest.skip("no dispatch hook, or not on CPU")
        shape, dtype = next(iter(self._cases()))
        args = self.make_inputs(shape, dtype, "cpu")
        ref = self.reference(*_clone_inputs(args))
        out = self.dispatch(*_clone_inputs(args))
        ratio, atol = self._tol(dtype)
        for i, (r, o) in enumerate(zip(_as_tuple(ref), _as_tuple(out))):
            assert_close_ratio(r, o, ratio=ratio, atol=atol, name=f"auto dispatch[{i}]")
