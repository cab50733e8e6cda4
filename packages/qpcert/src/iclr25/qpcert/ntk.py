"""Closed-form infinite-width NTKs for node classification (all node pairs).

Notation (NTK parameterisation, weights N(0, 1), ReLU scaled by sqrt(2/h) so that c_sigma = 2 is absorbed):

    kappa0(u) = (pi - arccos u) / pi
    kappa1(u) = (u (pi - arccos u) + sqrt(1 - u^2)) / pi
    E_ij  = c E[s(g_i) s(g_j)]   = sqrt(S_ii S_jj) kappa1(rho_ij)     (linear: E = Sigma)
    Ed_ij = c E[s'(g_i) s'(g_j)] = kappa0(rho_ij)                      (linear: Ed = 1)

GCN / SGC / GraphSAGE with L hidden layers, f = S s(... s(S X W1) ...) W_{L+1}:

    Sigma_1 = S X X^T S^T,  Theta_1 = Sigma_1
    Sigma_{l+1} = S E_l S^T,  Theta_{l+1} = S (Theta_l o Ed_l) S^T + Sigma_{l+1},   NTK = Theta_{L+1}

Skip-PC adds Sigma_1 to every Sigma_{l+1} (a linear skip from S X with its own weights). Skip-alpha starts from
P X X^T P^T with P = (1-a) S + a I and uses Sigma_{l+1} = (1-a)^2 S E_l S^T + a^2 X X^T (an independent skip from X);
the back-propagated term then carries (1-a)^2. GIN (S = A + I) has no aggregation after the last layer:
Theta_{L+1} = Theta_L o Ed_L + E_L. MLP and APPNP use an MLP with biases, Sigma_1 = X X^T + 1,
Sigma_{l+1} = E_l + 1, Theta_{l+1} = Theta_l o Ed_l + Sigma_{l+1}, then propagate: NTK = S Theta S^T (S = I for MLP).

``official_compat=True`` reproduces two properties of the official code (saper0/qpcert ``NTK``): (1) the
covariance is clamped *in place* to min(Sigma_ii, Sigma_jj) before the arc-cosine expectations, and the clamped
Sigma is also used in Sigma o Ed (Cauchy-Schwarz only bounds |Sigma_ij| by sqrt(Sigma_ii Sigma_jj), so this moves
the NTK by a few percent on real graphs); (2) the skip-alpha back-propagated term lacks the (1-a)^2 factor. The
default follows the mathematics, and is what finite-width networks converge to (``iclr25.qpcert.empirical``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import graph
from .config import ArchSpec


def kappa0(u: torch.Tensor) -> torch.Tensor:
    return (math.pi - torch.arccos(u)) / math.pi


def kappa1(u: torch.Tensor) -> torch.Tensor:
    return (u * (math.pi - torch.arccos(u)) + torch.sqrt(torch.clamp(1.0 - u * u, min=0.0))) / math.pi


def arccos_expectations(sigma: torch.Tensor, official_compat: bool = False):
    """ReLU expectations (E, Ed) of a centred Gaussian with covariance ``sigma`` (c_sigma = 2 absorbed).

    Returns ``(E, Ed, sigma_used)``; ``sigma_used`` is ``sigma`` itself, or its clamped copy with ``official_compat``.
    """
    diag = torch.diagonal(sigma)
    si, sj = diag[None, :], diag[:, None]
    if official_compat:
        sigma = sigma.clone()
        bound = torch.minimum(si.expand_as(sigma), sj.expand_as(sigma))
        over = (sigma > si) | (sigma > sj)
        sigma[over] = bound[over]
    q = torch.sqrt(torch.clamp(si * sj, min=0.0))
    rho = torch.where(q > 0, sigma / torch.where(q > 0, q, torch.ones_like(q)), torch.zeros_like(q))
    rho = rho.clamp(-1.0, 1.0)
    rho.fill_diagonal_(1.0)
    return q * kappa1(rho), kappa0(rho), sigma


def _expect(sigma: torch.Tensor, activation: str, official_compat: bool):
    if activation == "linear":
        return sigma, torch.ones_like(sigma), sigma
    return arccos_expectations(sigma, official_compat)


def _validate_features(features, n: int) -> torch.Tensor:
    if hasattr(features, "toarray") and not isinstance(features, torch.Tensor):
        features = features.toarray()
    if isinstance(features, torch.Tensor):
        x = (features.to_dense() if features.is_sparse else features).detach().to(torch.float64)
    else:
        x = torch.as_tensor(np.asarray(features, dtype=np.float64))
    if x.ndim != 2 or x.shape[0] != n:
        raise ValueError(f"features must be a [n, d] matrix with n = {n} rows, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("features contain NaN or inf entries")
    return x


def propagation_operator(adj, spec: ArchSpec) -> torch.Tensor:
    """The operator S of ``spec.arch`` for this adjacency."""
    if spec.arch in ("gcn", "sgc"):
        return graph.row_normalize(adj) if spec.normalization == "row" else graph.sym_normalize(adj)
    if spec.arch == "sage":
        return graph.sage_operator(adj)
    if spec.arch == "gin":
        return graph.gin_operator(adj)
    if spec.arch == "appnp":
        return graph.appnp_operator(adj, spec.appnp_alpha, spec.appnp_iterations, spec.appnp_exact)
    return torch.eye(graph.to_dense_adjacency(adj).shape[0], dtype=torch.float64)  # mlp


def _ntk_gcn(x: torch.Tensor, s: torch.Tensor, spec: ArchSpec, activation: str) -> torch.Tensor:
    xxt = x @ x.T
    a = spec.skip_alpha
    if spec.skip == "alpha":
        p = (1.0 - a) * s + a * torch.eye(s.shape[0], dtype=s.dtype)
        sigma = p @ xxt @ p.T
    else:
        sigma = s @ xxt @ s.T
    sigma_skip = sigma if spec.skip == "pc" else xxt
    theta = sigma
    for _ in range(spec.depth):
        e, ed, used = _expect(sigma, activation, spec.official_compat)
        theta = theta + (used - sigma)
        back = s @ (theta * ed) @ s.T
        sigma = s @ e @ s.T
        if spec.skip == "pc":
            sigma = sigma + sigma_skip
        elif spec.skip == "alpha":
            sigma = (1.0 - a) ** 2 * sigma + a**2 * sigma_skip
            if not spec.official_compat:
                back = (1.0 - a) ** 2 * back
        theta = back + sigma
    return theta


def _ntk_gin(x: torch.Tensor, s: torch.Tensor, spec: ArchSpec, activation: str) -> torch.Tensor:
    sigma = s @ (x @ x.T) @ s.T
    theta = sigma
    for layer in range(spec.depth):
        e, ed, used = _expect(sigma, activation, spec.official_compat)
        theta = theta + (used - sigma)
        if layer < spec.depth - 1:
            sigma = s @ e @ s.T
            theta = s @ (theta * ed) @ s.T + sigma
        else:
            theta = theta * ed + e
    return theta


def _ntk_mlp_bias(x: torch.Tensor, spec: ArchSpec, activation: str) -> torch.Tensor:
    sigma = x @ x.T + 1.0
    theta = sigma
    for _ in range(spec.depth):
        e, ed, used = _expect(sigma, activation, spec.official_compat)
        theta = theta + (used - sigma)
        sigma = e + 1.0
        theta = theta * ed + sigma
    return theta


def ntk_from_spec(adj, features, spec: ArchSpec) -> torch.Tensor:
    """The n x n NTK of ``spec`` (float64)."""
    a = graph.to_dense_adjacency(adj)
    x = _validate_features(features, a.shape[0])
    activation = "linear" if spec.arch == "sgc" else spec.activation
    s = propagation_operator(a, spec)
    if spec.arch in ("gcn", "sgc", "sage"):
        q = _ntk_gcn(x, s, spec, activation)
    elif spec.arch == "gin":
        q = _ntk_gin(x, s, spec, activation)
    else:
        q = _ntk_mlp_bias(x, spec, activation)
        if spec.arch == "appnp":
            q = s @ q @ s.T
    if not torch.isfinite(q).all():
        raise ValueError(
            f"the NTK overflowed (non-finite entries): the features are too large (max |x| = {float(x.abs().max()):.3g});"
            " rescale them (e.g. divide by their norm)"
        )
    return 0.5 * (q + q.T)


def ntk_matrix(
    adj,
    features,
    arch: str = "gcn",
    depth: int = 1,
    activation: str | None = None,
    skip: str | None = None,
    official_compat: bool = False,
    **options,
) -> torch.Tensor:
    """Closed-form NTK [n, n] of ``arch`` on the graph ``adj`` with node ``features``.

    ``activation`` defaults to "relu" ("linear" for SGC, which is linear by definition). ``options`` are the remaining
    :class:`~iclr25.qpcert.config.ArchSpec` fields (``normalization``, ``skip_alpha``, ``appnp_alpha``,
    ``appnp_iterations``, ``appnp_exact``).
    """
    if activation is None:
        activation = "linear" if arch == "sgc" else "relu"
    if arch == "sgc" and activation != "linear":
        raise ValueError("SGC is a linear GCN: activation must be 'linear' (or None)")
    unknown = set(options) - {"normalization", "skip_alpha", "appnp_alpha", "appnp_iterations", "appnp_exact"}
    if unknown:
        raise TypeError(f"unknown ntk_matrix options {sorted(unknown)}")
    spec = ArchSpec(
        arch=arch, depth=depth, activation=activation, skip=skip, official_compat=official_compat, **options
    )
    return ntk_from_spec(adj, features, spec)
