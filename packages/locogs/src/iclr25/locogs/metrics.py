"""Image metrics as used in 3DGS / LocoGS evaluation: PSNR (pooled MSE), SSIM (3DGS Gaussian window), LPIPS (VGG,
weights supplied by the user: nothing can be downloaded)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


def _to_bchw(img: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(img, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(img).__name__}")
    if img.dim() == 3 and img.shape[-1] in (1, 3):  # [H, W, C]
        return img.permute(2, 0, 1)[None]
    if img.dim() == 4:  # [B, C, H, W]
        return img
    raise ValueError(f"{name} must be [H, W, C] (C = 1 or 3) or [B, C, H, W], got {tuple(img.shape)}")


def psnr(img: torch.Tensor, gt: torch.Tensor, data_range: float = 1.0) -> float:
    """PSNR with the MSE pooled over all pixels and channels (3DGS ``utils/image_utils.psnr`` on one image)."""
    a, b = _to_bchw(img, "img"), _to_bchw(gt, "gt")
    if a.shape != b.shape:
        raise ValueError(f"psnr: shapes differ {tuple(a.shape)} vs {tuple(b.shape)}")
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return float("inf") if mse == 0 else 10.0 * math.log10(data_range**2 / mse)


def _gaussian_window(size: int, sigma: float, dtype, device) -> torch.Tensor:
    x = torch.arange(size, dtype=torch.float64, device=device) - size // 2
    g = torch.exp(-(x**2) / (2 * sigma**2))
    g = g / g.sum()
    return (g[:, None] * g[None, :]).to(dtype)


def ssim_map(img: torch.Tensor, gt: torch.Tensor, window_size: int = 11, sigma: float = 1.5, padding: str = "zero"):
    """Per-pixel SSIM map [B, C, H', W'] (3DGS ``loss_utils.ssim``: 11x11 Gaussian window, sigma 1.5,
    C1 = 0.01^2, C2 = 0.03^2). ``padding="zero"``: same-size output, zero padded (3DGS); ``"valid"``: interior only."""
    a, b = _to_bchw(img, "img"), _to_bchw(gt, "gt")
    if a.shape != b.shape:
        raise ValueError(f"ssim: shapes differ {tuple(a.shape)} vs {tuple(b.shape)}")
    if padding not in ("zero", "valid"):
        raise ValueError(f"ssim: padding must be 'zero' or 'valid', got {padding!r}")
    ch = a.shape[1]
    w = _gaussian_window(window_size, sigma, a.dtype, a.device).expand(ch, 1, window_size, window_size)
    pad = window_size // 2 if padding == "zero" else 0

    def filt(x):
        return F.conv2d(x, w, padding=pad, groups=ch)

    mu1, mu2 = filt(a), filt(b)
    s11 = filt(a * a) - mu1 * mu1
    s22 = filt(b * b) - mu2 * mu2
    s12 = filt(a * b) - mu1 * mu2
    c1, c2 = 0.01**2, 0.03**2
    return ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (s11 + s22 + c2))


def ssim(img: torch.Tensor, gt: torch.Tensor, padding: str = "zero", window_size: int = 11) -> torch.Tensor:
    """Mean SSIM (differentiable scalar tensor); see ``ssim_map``."""
    return ssim_map(img, gt, window_size=window_size, padding=padding).mean()


# --------------------------------------------------------------------------------------------------------------------
# LPIPS (Zhang et al. 2018), VGG-16 variant as used by 3DGS / LocoGS metrics.py. No weights ship with this package.
_VGG_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512)
_VGG_TAPS = (3, 8, 15, 22, 29)  # relu1_2, relu2_2, relu3_3, relu4_3, relu5_3 in torchvision's vgg16().features
_LPIPS_CHANNELS = (64, 128, 256, 512, 512)


class LPIPS(nn.Module):
    """LPIPS-VGG with torchvision's ``vgg16().features`` layer numbering (``features.N.weight``) and the ``lpips``
    package's linear heads (``lin0..lin4.model.1.weight``). Load both from one state dict with ``load_weights``."""

    def __init__(self):
        super().__init__()
        layers, c_in = [], 3
        for v in _VGG_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c_in, v, 3, padding=1), nn.ReLU(inplace=False)]
                c_in = v
        self.features = nn.Sequential(*layers)
        self.lins = nn.ModuleList(nn.Conv2d(c, 1, 1, bias=False) for c in _LPIPS_CHANNELS)
        self.register_buffer("shift", torch.tensor([-0.030, -0.088, -0.188])[None, :, None, None])
        self.register_buffer("scale", torch.tensor([0.458, 0.448, 0.450])[None, :, None, None])
        for p in self.parameters():
            p.requires_grad_(False)

    def load_weights(self, path: str | Path) -> LPIPS:
        """Load a state dict holding ``features.N.*`` (torchvision VGG-16) and ``linK.model.1.weight`` (lpips)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"LPIPS weights not found at {path} (no weights can be downloaded: supply them)")
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
        mapped = {}
        for k, v in state.items():
            k = k.removeprefix("net.").removeprefix("module.")
            if k.startswith("lin") and ".model.1.weight" in k:
                mapped[f"lins.{int(k[3])}.weight"] = v
            elif k.startswith("features."):
                mapped[k] = v
        missing, _ = self.load_state_dict(mapped, strict=False)
        missing = [m for m in missing if m not in ("shift", "scale")]
        if missing:
            raise ValueError(f"LPIPS weights at {path} lack {len(missing)} tensors, e.g. {missing[:3]}")
        return self

    def forward(self, img: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
        """Images in [0, 1], [H, W, 3] or [B, 3, H, W]; returns LPIPS per image [B]."""
        a, b = _to_bchw(img, "img") * 2 - 1, _to_bchw(gt, "gt") * 2 - 1
        a, b = (a - self.shift) / self.scale, (b - self.shift) / self.scale
        total = 0.0
        tap = 0
        for i, layer in enumerate(self.features):
            a, b = layer(a), layer(b)
            if i in _VGG_TAPS:
                na = a / (a.norm(dim=1, keepdim=True) + 1e-10)
                nb = b / (b.norm(dim=1, keepdim=True) + 1e-10)
                total = total + self.lins[tap]((na - nb) ** 2).mean(dim=(1, 2, 3))
                tap += 1
                if tap == len(_VGG_TAPS):
                    break
        return total


def lpips(img: torch.Tensor, gt: torch.Tensor, weights_path: str | Path) -> float:
    """LPIPS-VGG of one image pair with user-supplied weights (see ``LPIPS.load_weights``)."""
    model = LPIPS().load_weights(weights_path).to(img.device)
    with torch.no_grad():
        return float(model(img, gt).mean())


def measure_render_time(fn, warmup: int = 2, repeat: int = 5) -> float:
    """Median seconds of ``fn()`` after ``warmup`` calls (CUDA-synchronised)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
