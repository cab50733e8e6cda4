"""The SyllableLM unit language model (official ``fairseq/models/cluster`` + ``valle/valle_alan.py`` structure).

Decoder-only, pre-LN transformer with learned absolute positions, GELU MLP, no qkv bias, tied input/output
embeddings, **no final LayerNorm**, trained from scratch. The vocabulary has ``vocab + 1`` entries: index ``vocab``
is both BOS and STOP. ``generate`` keeps a KV cache whose result equals full recomputation (the official cache
concatenates cached keys into the values).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SyllableLM", "SyllableLMConfig", "analytic_num_params", "pad_batch"]


@dataclass
class SyllableLMConfig:
    """Official defaults (``config/cluster_alan.yaml`` / ``cluster_model.py``)."""

    vocab: int = 8192  # units of the 6.25 Hz tokenizer (LibriSpeech_bulk_2116_24576_agg_8192)
    depth: int = 12
    heads: int = 12
    dim: int = 768
    mlp_ratio: int = 4
    dropout: float = 0.1  # encoder dropout and post-MLP dropout; attention dropout is 0
    max_pos: int = 3000  # learned absolute positions
    final_norm: bool = False  # the official model has no final LayerNorm

    def __post_init__(self):
        if self.dim % self.heads:
            raise ValueError(f"dim={self.dim} must be divisible by heads={self.heads}")
        for name in ("vocab", "depth", "heads", "dim", "mlp_ratio", "max_pos"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def bos(self) -> int:
        return self.vocab

    @property
    def stop(self) -> int:
        return self.vocab


def analytic_num_params(cfg: SyllableLMConfig) -> int:
    """Parameter count: tied embedding (V+1)d, positions Pd, per block 2 LayerNorms (4d), qkv 3d^2 (no bias),
    output projection d^2 + d, MLP 2 m d^2 + m d + d; plus a final LayerNorm (2d) when enabled."""
    d, m = cfg.dim, cfg.mlp_ratio
    block = 4 * d + 3 * d * d + d * d + d + 2 * m * d * d + m * d + d
    return (cfg.vocab + 1) * d + cfg.max_pos * d + cfg.depth * block + (2 * d if cfg.final_norm else 0)


class _Block(nn.Module):
    def __init__(self, cfg: SyllableLMConfig):
        super().__init__()
        d = cfg.dim
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg.mlp_ratio * d)
        self.fc2 = nn.Linear(cfg.mlp_ratio * d, d)
        self.drop = nn.Dropout(cfg.dropout)  # attention-output and post-MLP dropout (official drop / post_mlp_drop)

    def forward(self, x: torch.Tensor, cache: tuple | None = None, key_mask: torch.Tensor | None = None):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)  # values with values (the official cache mixes in keys)
        past = k.shape[2] - t
        # causal over the full key range: query i (absolute past + i) sees keys 0..past + i
        causal = torch.ones(t, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=past)
        mask = causal[None, None]
        if key_mask is not None:
            # padded keys are hidden; a padded query still sees itself, so no attention row is empty (NaN-free)
            own = torch.arange(k.shape[2], device=x.device)[None, :] == past + torch.arange(t, device=x.device)[:, None]
            mask = mask & (key_mask[:, None, None, :] | own[None, None])
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(b, t, d)))
        x = x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        return x, (k, v)


def pad_batch(seqs: Sequence, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[BOS] + units`` inputs and ``units + [STOP]`` targets, padded (inputs with STOP, targets with -100)."""
    seqs = [torch.as_tensor(s, dtype=torch.long).reshape(-1) for s in seqs]
    if not seqs:
        raise ValueError("empty batch")
    n = max(len(s) for s in seqs) + 1
    inp = torch.full((len(seqs), n), stop, dtype=torch.long)
    tgt = torch.full((len(seqs), n), -100, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s) and (s.min() < 0 or s.max() >= stop):
            raise ValueError(f"unit ids must lie in [0, {stop}), got range [{int(s.min())}, {int(s.max())}]")
        inp[i, 1 : len(s) + 1] = s
        tgt[i, : len(s)] = s
        tgt[i, len(s)] = stop
    return inp, tgt


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    """Run in eval mode (no dropout) and restore the caller's train/eval flags of every submodule afterwards."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, mode in modes:
            m.training = mode


class SyllableLM(nn.Module):
    def __init__(self, config: SyllableLMConfig | None = None):
        super().__init__()
        self.config = cfg = config or SyllableLMConfig()
        self.embed = nn.Embedding(cfg.vocab + 1, cfg.dim)
        self.pos = nn.Embedding(cfg.max_pos, cfg.dim)
        self.blocks = nn.ModuleList([_Block(cfg) for _ in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim) if cfg.final_norm else None
        self.apply(self._init)
        # official: token and position tables ~ N(0, 1/sqrt(d)); linears BERT-style N(0, 0.02)
        nn.init.normal_(self.embed.weight, std=cfg.dim**-0.5)
        nn.init.normal_(self.pos.weight, std=cfg.dim**-0.5)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        tokens: torch.Tensor,
        cache: list | None = None,
        key_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ):
        """Logits ``[B, T, V + 1]`` for tokens ``[B, T]`` continuing ``cache`` (a list of per-layer (k, v)).

        Returns ``(logits, new_cache)``. ``key_mask [B, past + T]`` marks real (True) vs padded keys; ``positions
        [B, T]`` overrides the position ids (default ``past .. past + T - 1``; left-padded batches need their own).
        """
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [B, T], got shape {tuple(tokens.shape)}")
        past = 0 if cache is None else cache[0][0].shape[2]
        t = tokens.shape[1]
        if past + t > self.config.max_pos:
            raise ValueError(f"sequence of {past + t} tokens exceeds max_pos={self.config.max_pos}")
        if positions is None:
            pos_emb = self.pos(torch.arange(past, past + t, device=tokens.device))[None]
        else:
            if positions.shape != tokens.shape:
                raise ValueError(
                    f"positions must have the tokens' shape {tuple(tokens.shape)}, got {tuple(positions.shape)}"
                )
            pos_emb = self.pos(positions.to(tokens.device))
        x = self.embed(tokens) + pos_emb  # no input dropout (official)
        new_cache = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, None if cache is None else cache[i], key_mask)
            new_cache.append(kv)
        if self.norm is not None:
            x = self.norm(x)
        return x @ self.embed.weight.T, new_cache

    def loss(self, batch) -> torch.Tensor:
        """Mean next-token cross-entropy of ``[BOS] + units -> units + [STOP]`` over a list of unit sequences (or a
        ``[B, T]`` tensor padded with -100)."""
        if isinstance(batch, torch.Tensor):
            if batch.ndim != 2:
                raise ValueError(f"batch tensor must be [B, T], got shape {tuple(batch.shape)}")
            batch = [row[row != -100] for row in batch]
        dev = self.embed.weight.device
        inp, tgt = pad_batch(batch, self.config.stop)
        logits, _ = self(inp.to(dev))
        return F.cross_entropy(logits.flatten(0, 1), tgt.to(dev).flatten(), ignore_index=-100)

    @torch.no_grad()
    def score(self, units, normalize: bool = False) -> torch.Tensor:
        """Log-likelihood (nats) of each unit sequence followed by STOP, given BOS; ``normalize`` divides by the
        number of predicted tokens. ``units``: one sequence or a list of them. Returns ``[B]``.

        Runs in eval mode (no dropout) and leaves the model's train/eval mode as it found it."""
        with _eval_mode(self):
            return self._score(units, normalize)

    def _score(self, units, normalize: bool) -> torch.Tensor:
        if (
            isinstance(units, torch.Tensor)
            and units.ndim == 1
            or (isinstance(units, (list, tuple)) and units and not isinstance(units[0], (list, tuple, torch.Tensor)))
        ):
            units = [units]
        dev = self.embed.weight.device
        inp, tgt = pad_batch(units, self.config.stop)
        logits, _ = self(inp.to(dev))
        logp = torch.log_softmax(logits.float(), -1)
        tgt = tgt.to(dev)
        valid = tgt != -100
        tok = logp.gather(-1, tgt.clamp(min=0)[..., None])[..., 0] * valid
        total = tok.sum(1)
        return total / valid.sum(1) if normalize else total

    @torch.no_grad()
    def generate(
        self,
        prompt,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        stop_at_eos: bool = True,
    ):
        """Continue ``prompt`` (1-D unit ids, BOS is prepended internally); returns prompt + new tokens.

        ``temperature=0`` is greedy; ``top_k`` (>= 1) keeps the k most likely tokens. Generation stops early at STOP
        when ``stop_at_eos`` (STOP is not returned). Runs in eval mode (no dropout) and restores the model's mode.
        """
        self._check_sampling(max_new_tokens, temperature, top_k)
        prompt = self._check_prompt(prompt)
        with _eval_mode(self):
            return self._generate(prompt, max_new_tokens, temperature, top_k, use_cache, generator, stop_at_eos)

    @torch.no_grad()
    def generate_batch(
        self,
        prompts,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        stop_at_eos: bool = True,
    ) -> list[torch.Tensor]:
        """``generate`` for a list of prompts of any lengths at once (left-padded, masked, per-row positions).

        Row i equals ``generate(prompts[i], ...)`` (greedy: the same tokens; sampling draws from ``generator`` row by
        row, so the streams differ from one-at-a-time calls). Rows that reach STOP stop growing; the loop ends when
        all have stopped or after ``max_new_tokens``.
        """
        self._check_sampling(max_new_tokens, temperature, top_k)
        if isinstance(prompts, torch.Tensor) and prompts.ndim == 2:
            prompts = list(prompts)
        if not isinstance(prompts, (list, tuple)) or not prompts:
            raise ValueError("prompts must be a non-empty list of 1-D unit sequences")
        prompts = [self._check_prompt(p) for p in prompts]
        with _eval_mode(self):
            return self._generate_batch(prompts, max_new_tokens, temperature, top_k, use_cache, generator, stop_at_eos)

    @staticmethod
    def _check_sampling(max_new_tokens, temperature, top_k) -> None:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be None (no truncation) or an int >= 1, got {top_k!r}")

    def _check_prompt(self, prompt) -> torch.Tensor:
        prompt = torch.as_tensor(prompt, dtype=torch.long)
        if prompt.ndim > 1:
            raise ValueError(f"prompt must be 1-D unit ids, got shape {tuple(prompt.shape)}")
        prompt = prompt.reshape(-1).cpu()
        if len(prompt) and (prompt.min() < 0 or prompt.max() >= self.config.vocab):
            raise ValueError(
                f"prompt ids must lie in [0, {self.config.vocab}), got range [{int(prompt.min())}, {int(prompt.max())}]"
            )
        return prompt

    def _generate_batch(self, prompts, max_new_tokens, temperature, top_k, use_cache, generator, stop_at_eos):
        dev = self.embed.weight.device
        b = len(prompts)
        lens = [len(p) + 1 for p in prompts]  # with BOS
        width = max(lens)
        tokens = torch.full((b, width), self.config.stop, dtype=torch.long)
        mask = torch.zeros(b, width, dtype=torch.bool)
        for i, p in enumerate(prompts):
            tokens[i, width - lens[i] :] = torch.cat([torch.tensor([self.config.bos]), p])
            mask[i, width - lens[i] :] = True
        pads = torch.tensor([width - n for n in lens])
        positions = (torch.arange(width)[None, :] - pads[:, None]).clamp(min=0)
        tokens, mask, positions = tokens.to(dev), mask.to(dev), positions.to(dev)
        out: list[list[int]] = [[] for _ in range(b)]
        done = [False] * b
        cache = None
        step_tokens, step_pos = tokens, positions
        for _ in range(max_new_tokens):
            if use_cache:
                logits, cache = self(step_tokens, cache, key_mask=mask, positions=step_pos)
            else:
                logits, _ = self(tokens, key_mask=mask, positions=positions)
            nxt = []
            for i in range(b):
                tok = self.config.stop
                if not done[i]:
                    tok = self._sample(logits[i, -1].float(), temperature, top_k, generator)
                    if stop_at_eos and tok == self.config.stop:
                        done[i] = True
                    else:
                        out[i].append(tok)
                nxt.append(tok)
            if all(done):
                break
            step_tokens = torch.tensor(nxt, dtype=torch.long, device=dev)[:, None]
            step_pos = positions[:, -1:] + 1
            tokens = torch.cat([tokens, step_tokens], dim=1)
            positions = torch.cat([positions, step_pos], dim=1)
            mask = torch.cat([mask, torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
        return [torch.cat([p, torch.tensor(o, dtype=torch.long)]) for p, o in zip(prompts, out)]

    def _generate(self, prompt, max_new_tokens, temperature, top_k, use_cache, generator, stop_at_eos):
        dev = self.embed.weight.device
        seq = torch.cat([torch.tensor([self.config.bos]), prompt]).to(dev)[None]
        cache = None
        out = []
        for _ in range(max_new_tokens):
            if use_cache:
                logits, cache = self(seq if cache is None else seq[:, -1:], cache)
            else:
                logits, _ = self(seq)
            nxt = self._sample(logits[0, -1].float(), temperature, top_k, generator)
            if stop_at_eos and nxt == self.config.stop:
                break
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]], device=dev)], dim=1)
        return torch.cat([prompt, torch.tensor(out, dtype=torch.long)])

    @staticmethod
    def _sample(logits: torch.Tensor, temperature: float, top_k: int | None, gen) -> int:
        if temperature == 0:
            return int(logits.argmax())
        logits = logits / temperature
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, -1).cpu()
        return int(torch.multinomial(probs, 1, generator=gen))

    def config_dict(self) -> dict:
        return asdict(self.config)


def tri_stage_lr(
    step: int, total: int, warmup: float = 0.04, hold: float = 0.21, init_scale: float = 0.01, final_scale: float = 0.1
) -> float:
    """fairseq tri-stage multiplier: linear warmup from ``init_scale``, hold at 1, exponential decay to
    ``final_scale`` (official 16k / 84k / 300k of 400k updates = 4 % / 21 % / 75 %)."""
    w, h = int(warmup * total), int(hold * total)
    d = max(total - w - h, 1)
    if step < w:
        return init_scale + (1 - init_scale) * step / max(w, 1)
    if step < w + h:
        return 1.0
    frac = min((step - w - h) / d, 1.0)
    return math.exp(math.log(final_scale) * frac)
