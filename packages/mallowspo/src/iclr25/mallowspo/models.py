"""Tiny random-init causal LMs and a byte-level tokenizer, built locally (no hub downloads)."""

from __future__ import annotations

import torch

__all__ = ["SPECIAL_TOKENS", "byte_tokenizer", "tiny_causal_lm"]

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")  # ids 256, 257, 258 after the 256 byte tokens


def byte_tokenizer():
    """A ``transformers.PreTrainedTokenizerFast`` over the 256 bytes plus <pad>/<bos>/<eos> (vocabulary 259).

    Built from the ``tokenizers`` byte-level BPE with no merges, so every byte is one token and any text
    round-trips. Works with our trainer and with TRL.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_to_unicode = sorted(alphabet, key=lambda ch: _byte_of(ch))
    vocab = {ch: i for i, ch in enumerate(byte_to_unicode)}
    for j, tok in enumerate(SPECIAL_TOKENS):
        vocab[tok] = 256 + j
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>")


def _byte_of(ch: str) -> int:
    """Inverse of GPT-2's bytes_to_unicode for one character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip((chr(c) for c in cs), bs))[ch]


def tiny_causal_lm(
    vocab_size: int = 259,
    n_layer: int = 2,
    d_model: int = 64,
    n_head: int = 4,
    max_positions: int = 256,
    arch: str = "gpt2",
    seed: int = 0,
    pad_token_id: int = 256,
    bos_token_id: int = 257,
    eos_token_id: int = 258,
):
    """A small random-init ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` (float32, eval-mode dropout off)."""
    import transformers

    if arch not in ("gpt2", "llama"):
        raise ValueError(f"arch must be 'gpt2' or 'llama', got {arch!r}")
    if d_model % n_head:
        raise ValueError(f"d_model={d_model} must be divisible by n_head={n_head}")
    common = dict(
        vocab_size=vocab_size, pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id
    )
    if arch == "gpt2":
        cfg = transformers.GPT2Config(
            n_layer=n_layer,
            n_embd=d_model,
            n_head=n_head,
            n_positions=max_positions,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
        cls = transformers.GPT2LMHeadModel
    else:
        cfg = transformers.LlamaConfig(
            num_hidden_layers=n_layer,
            hidden_size=d_model,
            intermediate_size=2 * d_model,
            num_attention_heads=n_head,
            num_key_value_heads=n_head,
            max_position_embeddings=max_positions,
            **common,
        )
        cls = transformers.LlamaForCausalLM
    cfg._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(cfg)
    return model
