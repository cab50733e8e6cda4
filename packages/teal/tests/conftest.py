"""Fixtures of the TEAL tests: tiny random-init transformers models and the shipped small model."""

from __future__ import annotations

import pytest
import torch

from iclr25.teal.small_model import SmallModelConfig, build_model

torch.set_num_threads(1)  # tiny shapes: threads only add synchronisation overhead (and thrash on a shared machine)

TINY = SmallModelConfig(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=72,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


@pytest.fixture(params=["llama", "mistral", "qwen2"])
def tiny_model(request):
    return build_model(request.param, TINY, seed=0)


@pytest.fixture
def tiny_llama():
    return build_model("llama", TINY, seed=0)


def _random_batches(n_batches=2, batch=4, seq=24, vocab=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (batch, seq), generator=g) for _ in range(n_batches)]


@pytest.fixture
def tiny_batches():
    return _random_batches()


@pytest.fixture
def make_batches():
    return _random_batches


@pytest.fixture(scope="session")
def small_model():
    from iclr25.teal.small_model import load_small_model

    return load_small_model()


@pytest.fixture(scope="session")
def small_texts():
    from iclr25.teal.data.text import encode_bytes, shipped_calibration_text, shipped_evaluation_text

    return encode_bytes(shipped_calibration_text()), encode_bytes(shipped_evaluation_text())
