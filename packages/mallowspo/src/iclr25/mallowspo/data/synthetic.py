"""A sentiment-like generation task with known reward and prompt-dependent preference dispersion (offline IMDB
stand-in).

Prompts start with a "kind" character: ``!`` (clear prompts: annotators agree, Bradley-Terry scale high) or ``?``
(ambiguous prompts: labels are noisy, scale low), followed by a few random context letters and ``:``. Completions
are strings over the letters ``abcdefgh``; the reward is the fraction of *positive* letters (``ab``). The supervised
data makes the reference model confident after ``!`` and uniform after ``?``, so its entropy carries the dispersion,
which is the signal the MallowsPO estimator reads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SyntheticSentiment"]

LETTERS = "abcdefgh"
POSITIVE = "ab"


class SyntheticSentiment:
    """Generator of prompts, SFT rows and Bradley-Terry-labelled preference pairs.

    Args:
        completion_length: letters per completion.
        scales: Bradley-Terry scale per prompt kind, applied to the reward difference times ``completion_length``.
        sft_probs: letter distribution of the SFT completions per kind.
    """

    def __init__(
        self,
        completion_length: int = 8,
        scales: dict[str, float] | None = None,
        sft_probs: dict[str, list[float]] | None = None,
        context_length: int = 3,
    ):
        if completion_length < 1 or context_length < 0:
            raise ValueError("completion_length must be >= 1 and context_length >= 0")
        self.completion_length = completion_length
        self.context_length = context_length
        self.scales = dict(scales or {"!": 3.0, "?": 0.3})
        self.sft_probs = dict(
            sft_probs
            or {
                "!": [0.06, 0.06, 0.5, 0.2, 0.06, 0.04, 0.04, 0.04],
                "?": [1.0 / len(LETTERS)] * len(LETTERS),
            }
        )
        if set(self.scales) != set(self.sft_probs):
            raise ValueError("scales and sft_probs must have the same prompt kinds")
        for kind, p in self.sft_probs.items():
            if len(kind) != 1 or len(p) != len(LETTERS) or abs(sum(p) - 1) > 1e-9:
                raise ValueError(f"sft_probs[{kind!r}] must be {len(LETTERS)} probabilities summing to 1")

    @property
    def kinds(self) -> list[str]:
        return sorted(self.scales)

    def prompt(self, rng: np.random.Generator, kind: str | None = None) -> str:
        kind = kind if kind is not None else self.kinds[rng.integers(len(self.kinds))]
        ctx = "".join(rng.choice(list(LETTERS), size=self.context_length))
        return f"{kind}{ctx}:"

    @staticmethod
    def kind_of(prompt: str) -> str:
        return prompt[0]

    def reward(self, completion: str) -> float:
        """Fraction of positive letters among the first ``completion_length`` characters (0 if empty)."""
        text = completion[: self.completion_length]
        return sum(ch in POSITIVE for ch in text) / self.completion_length

    def sft_rows(self, n: int, rng: np.random.Generator) -> list[dict]:
        rows = []
        for _ in range(n):
            prompt = self.prompt(rng)
            p = self.sft_probs[self.kind_of(prompt)]
            completion = "".join(rng.choice(list(LETTERS), size=self.completion_length, p=p))
            rows.append({"prompt": prompt, "completion": completion})
        return rows

    def preference_probability(self, prompt: str, a: str, b: str) -> float:
        """P(a ≻ b | prompt) = σ(scale(kind) * L * (r(a) - r(b)))."""
        z = self.scales[self.kind_of(prompt)] * self.completion_length * (self.reward(a) - self.reward(b))
        return float(1.0 / (1.0 + np.exp(-z)))

    def label_pairs(self, prompts, completions_a, completions_b, rng: np.random.Generator) -> list[dict]:
        """TRL-format rows {"prompt", "chosen", "rejected"} labelled by the Bradley-Terry law above."""
        rows = []
        for prompt, a, b in zip(prompts, completions_a, completions_b):
            if rng.random() < self.preference_probability(prompt, a, b):
                rows.append({"prompt": prompt, "chosen": a, "rejected": b})
            else:
                rows.append({"prompt": prompt, "chosen": b, "rejected": a})
        return rows
