"""Kernel dispatch: ``backend="auto"`` runs Triton on CUDA tensors and the torch reference on CPU.

Triton modules are imported lazily, only when the Triton path is chosen, so that the interpreter switch
(``TRITON_INTERPRET``) set by the test plugin is seen when ``@triton.jit`` runs.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .reference import convex_upsample_reference, corr4d_local_reference

__all__ = ["local_corr4d", "upsample_convex", "corr4d_local_reference", "convex_upsample_reference"]

# The dispatchers are not named like the kernel modules (corr4d_local.py, convex_upsample.py): importing a submodule
# binds its name on this package and would shadow a same-named function.


def _check_float(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch.Tensor, got {type(t).__name__}")


def local_corr4d(
    fmap: torch.Tensor, coords: torch.Tensor, supp: torch.Tensor, radius: int, backend: str = "auto"
) -> torch.Tensor:
    """Local 4D correlation; see ``corr4d_local_reference``. fmap [B,T,H,W,C], coords [B,T,N,2], supp [B,N,P^2,C]."""
    for name, t in (("fmap", fmap), ("coords", coords), ("supp", supp)):
        _check_float(name, t)
    p2 = (2 * radius + 1) ** 2
    if fmap.dim() != 5 or coords.dim() != 4 or coords.shape[-1] != 2 or supp.dim() != 4:
        raise ValueError(
            f"expected fmap [B,T,H,W,C], coords [B,T,N,2], supp [B,N,P^2,C]; got {tuple(fmap.shape)}, "
            f"{tuple(coords.shape)}, {tuple(supp.shape)}"
        )
    b, t, _, _, c = fmap.shape
    n = coords.shape[2]
    if coords.shape[:2] != (b, t) or supp.shape != (b, n, p2, c):
        raise ValueError(
            f"shape mismatch: fmap {tuple(fmap.shape)}, coords {tuple(coords.shape)}, supp {tuple(supp.shape)} "
            f"(expected supp {(b, n, p2, c)} for radius {radius})"
        )
    if resolve_backend(fmap, backend) == "triton":
        from .corr4d_local import corr4d_local_triton

        return corr4d_local_triton(fmap, coords, supp, radius)
    return corr4d_local_reference(fmap, coords, supp, radius)


def upsample_convex(
    x: torch.Tensor, weights: torch.Tensor, factor: int, kernel: int, backend: str = "auto"
) -> torch.Tensor:
    """Convex upsampling; see ``convex_upsample_reference``. x [B,C,h,w], weights [B,K^2,h*f,w*f]."""
    _check_float("x", x)
    _check_float("weights", weights)
    if x.dim() != 4 or weights.dim() != 4:
        raise ValueError(f"expected x [B,C,h,w] and weights [B,K^2,H,W], got {tuple(x.shape)}, {tuple(weights.shape)}")
    b, _, h, w = x.shape
    if weights.shape != (b, kernel * kernel, h * factor, w * factor):
        raise ValueError(f"weights shape {tuple(weights.shape)} must be {(b, kernel * kernel, h * factor, w * factor)}")
    if resolve_backend(x, backend) == "triton":
        from .convex_upsample import convex_upsample_triton

        return convex_upsample_triton(x, weights, factor, kernel)
    return convex_upsample_reference(x, weights, factor, kernel)
