"""Tabular data container and parsers for the official data formats (UCI Adult, folktables ACSIncome CSV,
CelebA ``list_attr_celeba.txt``). Pure Python/numpy parsing: no pandas needed."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["TabularData", "load_acs_income", "load_celeba_attributes", "ACS_INCOME_FEATURES"]


@dataclass
class TabularData:
    X: np.ndarray  # [n, d] float64 (categoricals as integer codes)
    y: np.ndarray  # [n] int labels
    groups: np.ndarray  # [n] group labels (strings or ints)
    feature_names: list[str]

    def __post_init__(self) -> None:
        if not (len(self.X) == len(self.y) == len(self.groups)):
            raise ValueError(
                f"X, y and groups must have equal lengths, got {len(self.X)}, {len(self.y)}, {len(self.groups)}"
            )
        if self.X.ndim != 2 or self.X.shape[1] != len(self.feature_names):
            raise ValueError(f"X must be [n, {len(self.feature_names)}], got shape {self.X.shape}")

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, idx) -> TabularData:
        return TabularData(self.X[idx], self.y[idx], self.groups[idx], list(self.feature_names))

    def group_counts(self) -> dict:
        labels, counts = np.unique(self.groups, return_counts=True)
        return dict(zip(labels.tolist(), counts.tolist()))


# ---------------------------------------------------------------------------------------------- ACSIncome
#: The ACSIncome task of folktables: 10 features (the group columns SEX and RAC1P included, as in the official code).
ACS_INCOME_FEATURES = ["AGEP", "COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "WKHP", "SEX", "RAC1P"]
_ACS_SETS = {"all": ACS_INCOME_FEATURES, "two": ["AGEP", "SCHL"], "one": ["AGEP"]}


def _float(v: str, where: str) -> float:
    if v is None or v.strip() in ("", "NA", "nan"):
        return np.nan
    try:
        return float(v)
    except ValueError as exc:
        raise ValueError(f"{where}: expected a number, got {v!r}") from exc


def load_acs_income(path, group: str = "SEX", features: str = "all", threshold: float = 50000.0) -> TabularData:
    """ACSIncome from a folktables-format ACS PUMS person CSV (columns named as in PUMS: AGEP, ..., PINCP).

    Applies the folktables ``adult_filter`` (AGEP > 16, PINCP > 100, WKHP > 0, PWGTP >= 1 when present), target
    PINCP > 50000, missing values -> -1 (folktables' fill). group: "SEX" or "RAC1P"; features: "all" | "two" | "one".
    """
    if group not in ("SEX", "RAC1P"):
        raise ValueError(f"group must be 'SEX' or 'RAC1P', got {group!r}")
    if features not in _ACS_SETS:
        raise ValueError(f"features must be one of {sorted(_ACS_SETS)}, got {features!r}")
    cols = _ACS_SETS[features]
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ACS PUMS CSV not found: {path}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        need = set(ACS_INCOME_FEATURES) | {"PINCP"}
        missing = need - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path} lacks ACSIncome columns {sorted(missing)}")
        has_w = "PWGTP" in reader.fieldnames
        rows = []
        for lineno, r in enumerate(reader, start=2):
            vals = {
                k: _float(r[k], f"{path}, line {lineno}, column {k!r}") for k in need | ({"PWGTP"} if has_w else set())
            }
            if not (vals["AGEP"] > 16 and vals["PINCP"] > 100 and vals["WKHP"] > 0):
                continue
            if has_w and not vals["PWGTP"] >= 1:
                continue
            rows.append(vals)
    if not rows:
        raise ValueError(f"{path}: no rows left after the ACSIncome filter")
    X = np.array([[r[c] for c in cols] for r in rows], dtype=np.float64)
    X = np.where(np.isnan(X), -1.0, X)
    y = np.array([r["PINCP"] > threshold for r in rows], dtype=np.int64)
    if any(np.isnan(r[group]) for r in rows):
        raise ValueError(f"{path}: the group column {group!r} has missing values")
    g = np.array([int(r[group]) for r in rows], dtype=np.int64)
    return TabularData(X, y, g, list(cols))


# ---------------------------------------------------------------------------------------------- CelebA
def load_celeba_attributes(
    path,
    target: str = "Attractive",
    group: str = "Male",
    drop: tuple[str, ...] = ("Male", "Young", "Pale_Skin"),
    n_features: int | None = None,
) -> TabularData:
    """CelebA ``list_attr_celeba.txt``: line 1 the row count, line 2 the 40 attribute names, then
    ``<image> <40 values in {-1, 1}>``. Values become {0, 1}; the label is ``target``; the group is ``group``.
    The official scripts always remove Male, Young and Pale_Skin (the group candidates) from the features, and can
    keep only the first ``n_features`` remaining attributes.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CelebA attribute file not found: {path}")
    with open(path) as f:
        lines = [ln.split() for ln in f if ln.strip()]
    if len(lines) < 2:
        raise ValueError(f"{path} is not a list_attr_celeba file (needs a count line and a header line)")
    try:
        count = int(lines[0][0])
    except ValueError as exc:
        raise ValueError(f"{path}: first line must be the number of images, got {lines[0]!r}") from exc
    names = lines[1]
    body = lines[2:]
    if len(body) != count:
        raise ValueError(f"{path}: header says {count} images, found {len(body)} rows")
    for i, row in enumerate(body):
        if len(row) != len(names) + 1:
            raise ValueError(f"{path}: line {i + 3} has {len(row) - 1} values, expected {len(names)}")
    A = np.zeros((len(body), len(names)), dtype=np.int64)
    for i, row in enumerate(body):
        for j, v in enumerate(row[1:]):
            if v not in ("-1", "1"):
                raise ValueError(
                    f"{path}: line {i + 3}, column {names[j]!r}: attribute values must be -1 or 1, got {v!r}"
                )
            A[i, j] = int(v)
    A = (A > 0).astype(np.int64)
    for name in (target, group):
        if name not in names:
            raise ValueError(f"attribute {name!r} not in the file's header")
    keep = [n for n in names if n != target and n != group and n not in drop]
    if n_features is not None:
        keep = keep[:n_features]
    idx = [names.index(n) for n in keep]
    return TabularData(A[:, idx].astype(np.float64), A[:, names.index(target)], A[:, names.index(group)], keep)
