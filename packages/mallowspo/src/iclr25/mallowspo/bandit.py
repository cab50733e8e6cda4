"""A contextual bandit whose preferences follow Mallows models, with exactly solvable MallowsPO optima.

Prompts x = 0..M-1, arms y = 0..K-1. Each prompt has central positions mu0(x, y) (1 = best; lower is better) and a
dispersion phi(x) in (0, 1]:

* ``model="theta"``: P(i ≻ j | x) = pairwise_prob_theta(mu0_j - mu0_i, theta(x)) = σ(c(x) (mu0_j - mu0_i)) with
  theta(x) = -log phi(x) and Bradley-Terry scale c(x) = 2 theta(x) (the Spearman factor 2 is part of the scale).
* ``model="phi"``: mu0(x, .) is a permutation of 1..K and P(i ≻ j | x) = g_phi(mu0_j - mu0_i) for mu0_i < mu0_j,
  the exact marginal of a Mallows-phi ranking (pairs can also be read off sampled full rankings).

Population optima (all ordered pairs weighted by the true preference law, any reference policy):

* MallowsPO-θ with scale s(x): π*(y|x) ∝ π_ref(y|x) exp(c(x) (-mu0(x, y)) / (β s(x))); DPO is s ≡ 1, and s = c gives
  π_ref exp(-mu0/β), the same tilt for every prompt whatever its dispersion.
* MallowsPO-ϕ with the true phi(x) on Mallows-phi data: π* ∝ π_ref exp(-mu0/β).

The "target" policy below is π_ref exp(-mu0/β): the KL-regularised optimum for the dispersion-free reward -mu0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .losses import mallows_ipo_loss, mallows_phi_loss, mallows_theta_loss
from .mallows import pairwise_prob_phi, pairwise_prob_theta, sample_mallows_phi

__all__ = ["BanditFit", "MallowsBandit", "fit_bandit_policy"]

METHODS = ("dpo", "mallows_theta", "mallows_phi", "mallows_ipo")


class MallowsBandit:
    """Prompts × arms with Mallows preference laws; see the module docstring.

    Args:
        central: [M, K] central positions (lower = better). For ``model="phi"`` each row must be a permutation of
            1..K.
        dispersion: [M] phi(x) in (0, 1).
        model: ``"theta"`` or ``"phi"``.
        ref_probs: [M, K] reference policy (default uniform).
    """

    def __init__(self, central, dispersion, model: str = "theta", ref_probs=None):
        central = np.asarray(central, dtype=float)
        dispersion = np.asarray(dispersion, dtype=float)
        if central.ndim != 2 or central.shape[1] < 2:
            raise ValueError(f"central must be [M prompts, K >= 2 arms], got shape {central.shape}")
        if dispersion.shape != (central.shape[0],):
            raise ValueError(f"dispersion must have shape [M]={central.shape[0]}, got {dispersion.shape}")
        if not np.all((dispersion > 0) & (dispersion < 1)):
            raise ValueError("dispersion phi(x) must lie in (0, 1)")
        if model not in ("theta", "phi"):
            raise ValueError(f"model must be 'theta' or 'phi', got {model!r}")
        k = central.shape[1]
        if model == "phi" and not all(sorted(row) == list(range(1, k + 1)) for row in central.tolist()):
            raise ValueError("for model='phi' each row of central must be a permutation of 1..K (integer ranks)")
        if ref_probs is None:
            ref_probs = np.full(central.shape, 1.0 / k)
        ref_probs = np.asarray(ref_probs, dtype=float)
        if ref_probs.shape != central.shape or np.any(ref_probs <= 0) or not np.allclose(ref_probs.sum(1), 1):
            raise ValueError("ref_probs must be a positive [M, K] row-stochastic array")
        self.central, self.dispersion, self.model, self.ref_probs = central, dispersion, model, ref_probs

    @property
    def n_prompts(self) -> int:
        return self.central.shape[0]

    @property
    def n_arms(self) -> int:
        return self.central.shape[1]

    @property
    def theta(self) -> np.ndarray:
        return -np.log(self.dispersion)

    @property
    def scale(self) -> np.ndarray:
        """The MallowsPO-θ scale c(x) to feed as ``neg_log_dispersion``: the Bradley-Terry scale 2 θ(x)."""
        return 2.0 * self.theta

    @property
    def reward(self) -> np.ndarray:
        """Dispersion-free reward r(x, y) = -mu0(x, y)."""
        return -self.central

    def preference_matrix(self) -> np.ndarray:
        """[M, K, K] with P[x, i, j] = P(i ≻ j | x) (diagonal 1/2)."""
        m, k = self.central.shape
        out = np.full((m, k, k), 0.5)
        for x in range(m):
            for i in range(k):
                for j in range(k):
                    if i == j:
                        continue
                    d = self.central[x, j] - self.central[x, i]
                    if self.model == "theta":
                        out[x, i, j] = pairwise_prob_theta(d, self.theta[x])
                    else:
                        out[x, i, j] = pairwise_prob_phi(abs(d), self.dispersion[x])
                        if d < 0:
                            out[x, i, j] = 1.0 - out[x, i, j]
        return out

    def sample_pairs(self, n: int, rng=None, from_rankings: bool = False):
        """n preference pairs (prompt, chosen, rejected): prompt uniform, arm pair uniform, winner by the law.

        With ``from_rankings`` (phi model only) each pair is read off a full Mallows-phi ranking drawn by repeated
        insertion, which has the same pairwise law.
        """
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        m, k = self.central.shape
        prompts = rng.integers(0, m, size=n)
        a = rng.integers(0, k, size=n)
        b = (a + rng.integers(1, k, size=n)) % k  # b != a, uniform over the other arms
        if from_rankings:
            if self.model != "phi":
                raise ValueError("from_rankings is only exact for the Mallows-phi model")
            wins = np.empty(n, dtype=bool)
            for t in range(n):
                order = np.argsort(self.central[prompts[t]])  # central ranking, best arm first
                ranking = sample_mallows_phi(k, self.dispersion[prompts[t]], central=order, rng=rng).tolist()
                wins[t] = ranking.index(a[t]) < ranking.index(b[t])
        else:
            p = self.preference_matrix()[prompts, a, b]
            wins = rng.random(n) < p
        chosen = np.where(wins, a, b)
        rejected = np.where(wins, b, a)
        return prompts, chosen, rejected

    def closed_form_policy(self, beta: float, scale=None) -> np.ndarray:
        """Population optimum of MallowsPO-θ/DPO on theta-model data: π_ref exp(c (-mu0) / (β s)).

        ``scale`` s(x): ``None`` means the true c(x) (MallowsPO-θ with the exact dispersion), 1.0 is DPO.
        """
        if self.model != "theta":
            raise ValueError("the sigmoid-link closed form holds for model='theta'; use target_policy for phi")
        s = self.scale if scale is None else np.broadcast_to(np.asarray(scale, dtype=float), (self.n_prompts,))
        logits = np.log(self.ref_probs) + (self.scale / (beta * s))[:, None] * self.reward
        return _softmax(logits)

    def target_policy(self, beta: float) -> np.ndarray:
        """π_ref exp(-mu0/β): the optimum of MallowsPO with the true dispersion, for both models."""
        return _softmax(np.log(self.ref_probs) + self.reward / beta)

    def expected_reward(self, policy: np.ndarray) -> np.ndarray:
        return np.sum(policy * self.reward, axis=1)

    @staticmethod
    def kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """KL(p || q) per row."""
        p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
        return np.sum(np.where(p > 0, p * (np.log(np.maximum(p, 1e-300)) - np.log(np.maximum(q, 1e-300))), 0), 1)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@dataclass
class BanditFit:
    policy: np.ndarray
    loss: float
    iterations: int
    grad_norm_at_start: float = float("nan")  # |∇ loss| w.r.t. the logits at the initial policy


def _pair_loss(method, pol, ref, prompts, chosen, rejected, bandit, beta):
    pc, pr = pol[prompts, chosen], pol[prompts, rejected]
    rc, rr = ref[prompts, chosen], ref[prompts, rejected]
    if method == "dpo":
        return mallows_theta_loss(pc, pr, rc, rr, 1.0, beta=beta, reduction="none")
    c = torch.as_tensor(bandit.scale, dtype=pol.dtype)[prompts]
    if method == "mallows_theta":
        return mallows_theta_loss(pc, pr, rc, rr, c, beta=beta, reduction="none")
    if method == "mallows_ipo":
        return mallows_ipo_loss(pc, pr, rc, rr, c, beta=beta, reduction="none")
    phi = torch.as_tensor(bandit.dispersion, dtype=pol.dtype)[prompts]
    return mallows_phi_loss(pc, pr, rc, rr, phi, beta=beta, reduction="none")


def fit_bandit_policy(
    bandit: MallowsBandit,
    method: str,
    beta: float,
    pairs=None,
    max_iter: int = 500,
    seed: int = 0,
    init: str = "reference",
) -> BanditFit:
    """Fit a tabular softmax policy [M, K] by minimising a preference loss with L-BFGS in float64.

    ``pairs=None`` minimises the population loss: every ordered pair (i, j) of each prompt weighted by
    P(i ≻ j | x); otherwise ``pairs = (prompts, chosen, rejected)`` as from :meth:`MallowsBandit.sample_pairs`.
    The loss is the library's own (``mallows_theta_loss`` etc.) evaluated on log π and log π_ref.
    ``init="reference"`` (default) starts exactly at π = π_ref, where every preference margin Δ is 0, as a language
    model run starts, and takes one plain gradient-descent step (step size 1) before L-BFGS; ``"random"`` starts from
    logits 0.01·N(0, 1) (seeded). ``grad_norm_at_start`` of the result is the gradient norm at the start (0 would
    mean the method cannot leave it).

    Why the first step: the Mallows-ϕ link jumps at 0 (g_ϕ(0+) > 1/2 > g_ϕ(0-)), and at Δ = 0 *both* orders of a
    pair take the right-limit value g_ϕ(0+), so the MallowsPO-ϕ loss at exactly π_ref is lower than at any nearby
    point although its gradient there is not 0. A gradient step (what an SGD/Adam trainer does) leaves it; a line
    search, which compares loss values, would stay.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if init not in ("reference", "random"):
        raise ValueError(f"init must be 'reference' or 'random', got {init!r}")
    m, k = bandit.central.shape
    if pairs is None:
        pmat = bandit.preference_matrix()
        xs, ii, jj = np.nonzero(~np.eye(k, dtype=bool)[None].repeat(m, 0))
        prompts, chosen, rejected = (torch.as_tensor(v) for v in (xs, ii, jj))
        weights = torch.as_tensor(pmat[xs, ii, jj])
    else:
        prompts, chosen, rejected = (torch.as_tensor(np.asarray(v), dtype=torch.long) for v in pairs)
        weights = torch.ones(len(prompts), dtype=torch.float64)
    weights = weights / weights.sum()
    ref = torch.log(torch.as_tensor(bandit.ref_probs))
    if init == "reference":
        logits = ref.clone().to(torch.float64).requires_grad_(True)
    else:
        gen = torch.Generator().manual_seed(seed)
        logits = (0.01 * torch.randn(m, k, generator=gen, dtype=torch.float64)).requires_grad_(True)
    start_loss = (
        weights * _pair_loss(method, torch.log_softmax(logits, dim=1), ref, prompts, chosen, rejected, bandit, beta)
    ).sum()
    start_grad = torch.autograd.grad(start_loss, logits)[0]
    grad_norm_at_start = float(torch.linalg.vector_norm(start_grad))
    if init == "reference":
        with torch.no_grad():
            logits -= start_grad  # one gradient-descent step, step size 1
    opt = torch.optim.LBFGS(
        [logits], lr=1.0, max_iter=max_iter, tolerance_grad=1e-13, tolerance_change=1e-16, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        pol = torch.log_softmax(logits, dim=1)
        loss = (weights * _pair_loss(method, pol, ref, prompts, chosen, rejected, bandit, beta)).sum()
        loss.backward()
        return loss

    opt.step(closure)
    n_iter = opt.state[opt._params[0]].get("n_iter", 0)
    with torch.no_grad():
        pol = torch.log_softmax(logits, dim=1)
        loss = (weights * _pair_loss(method, pol, ref, prompts, chosen, rejected, bandit, beta)).sum()
    return BanditFit(
        policy=pol.exp().numpy(), loss=float(loss), iterations=int(n_iter), grad_norm_at_start=grad_norm_at_start
    )
