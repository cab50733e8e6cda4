"""Finite-width networks in NTK parameterisation mirroring each closed form in :mod:`iclr25.qpcert.ntk`, and their
empirical NTK by autograd. A test oracle: the average empirical NTK converges to the closed form as width grows.

All weights and biases are N(0, 1); a hidden layer of width h is scaled by sqrt(c / h) with c = 2 for ReLU and
c = 1 for the linear activation; the first layer is not scaled (the closed forms use X X^T without 1/d).
"""

from __future__ import annotations

import math

import torch

from . import graph
from .config import ArchSpec
from .ntk import _validate_features, propagation_operator


def _make_params(spec: ArchSpec, d: int, width: int, generator: torch.Generator) -> dict[str, list[torch.Tensor]]:
    def normal(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_(True)

    depth = spec.depth
    params = {"W": [normal(d, width)] + [normal(width, width) for _ in range(depth - 1)] + [normal(width)]}
    if spec.arch in ("mlp", "appnp"):
        params["b"] = [normal(width) for _ in range(depth)] + [normal(())]
    if spec.skip is not None:
        params["V"] = [normal(d, width) for _ in range(depth - 1)] + [normal(d)]
    return params


def _forward(spec: ArchSpec, s: torch.Tensor, x: torch.Tensor, params, activation: str) -> torch.Tensor:
    width = params["W"][0].shape[1]
    c = 2.0 if activation == "relu" else 1.0
    act = torch.relu if activation == "relu" else (lambda t: t)
    scale = math.sqrt(c / width)
    depth = spec.depth
    a = spec.skip_alpha
    eye = torch.eye(s.shape[0], dtype=s.dtype)
    w, b, v = params["W"], params.get("b"), params.get("V")

    if spec.arch in ("mlp", "appnp"):
        g = x @ w[0] + b[0]
        for layer in range(1, depth + 1):
            g = scale * act(g) @ w[layer] + b[layer]
        return s @ g

    if spec.arch == "gin":
        g = s @ x @ w[0]
        for layer in range(1, depth):
            g = s @ (scale * act(g)) @ w[layer]
        return scale * act(g) @ w[depth]

    first = ((1.0 - a) * s + a * eye) if spec.skip == "alpha" else s
    g = first @ x @ w[0]
    for layer in range(1, depth + 1):
        g_next = s @ (scale * act(g)) @ w[layer]
        if spec.skip == "pc":
            g_next = g_next + s @ x @ v[layer - 1]
        elif spec.skip == "alpha":
            g_next = (1.0 - a) * g_next + a * (x @ v[layer - 1])
        g = g_next
    return g


def empirical_ntk(adj, features, spec: ArchSpec, width: int = 1024, seed: int = 0) -> torch.Tensor:
    """Empirical NTK J J^T of one randomly initialised finite network of the given width."""
    a = graph.to_dense_adjacency(adj)
    x = _validate_features(features, a.shape[0])
    s = propagation_operator(a, spec)
    activation = "linear" if spec.arch == "sgc" else spec.activation
    gen = torch.Generator().manual_seed(int(seed))
    params = _make_params(spec, x.shape[1], int(width), gen)
    flat = [p for group in params.values() for p in group]
    with torch.enable_grad():
        f = _forward(spec, s, x, params, activation)
        rows = []
        for i in range(f.shape[0]):
            grads = torch.autograd.grad(f[i], flat, retain_graph=True, allow_unused=True)
            rows.append(
                torch.cat([(gr if gr is not None else torch.zeros_like(p)).reshape(-1) for gr, p in zip(grads, flat)])
            )
    jac = torch.stack(rows)
    return (jac @ jac.T).detach()


def mean_empirical_ntk(adj, features, spec: ArchSpec, width: int = 1024, seeds: int = 4) -> torch.Tensor:
    """Average of ``seeds`` empirical NTKs (seeds 0..seeds-1)."""
    return torch.stack([empirical_ntk(adj, features, spec, width, seed) for seed in range(seeds)]).mean(0)


def monte_carlo_expectations(sigma: torch.Tensor, samples: int = 200_000, seed: int = 0):
    """Monte-Carlo estimate of (E, Ed) = 2 E[relu(g_i) relu(g_j)], 2 E[1{g_i>0} 1{g_j>0}], g ~ N(0, sigma)."""
    gen = torch.Generator().manual_seed(int(seed))
    evals, evecs = torch.linalg.eigh(sigma)
    root = evecs * evals.clamp_min(0).sqrt()
    z = torch.randn(samples, sigma.shape[0], generator=gen, dtype=torch.float64)
    g = z @ root.T
    r = torch.relu(g)
    step = (g > 0).to(torch.float64)
    return 2.0 * r.T @ r / samples, 2.0 * step.T @ step / samples
