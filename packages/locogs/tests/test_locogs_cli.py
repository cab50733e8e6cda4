"""The demo command end to end on a tiny scene."""

from __future__ import annotations

import os

import pytest

from iclr25.locogs.cli import main


@pytest.mark.integration
def test_demo_prints_table_and_writes_files(tmp_path, capsys):
    args = ["demo", "--size", "12", "--views", "9", "--points", "60", "--iterations", "12", "--log2-hashmap", "8",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| 3DGS |" in out and "| LocoGS |" in out
    size = os.path.getsize(tmp_path / "scene.locogs")
    assert f"= file size {size}" in out
    assert (tmp_path / "side_by_side_test0.png").exists() and (tmp_path / "decoded.ply").exists()
    import json

    res = json.loads((tmp_path / "results.json").read_text())
    for name, row in res["methods"].items():  # interleaved timing, work and SH statistics are all reported
        assert row["render_s"]["repeats"] == 5 and row["render_s"]["min"] <= row["render_s"]["median"]
        assert row["pairs"] > 0 and sum(row["sh_degrees"]) == row["n"], name
    assert res["methods"]["LocoGS"]["file_size"] == size
    assert res["env"]["cpu_isa"] and res["env"]["threads"] >= 1


@pytest.mark.integration
def test_demo_baseline_only(tmp_path, capsys):
    assert main(["demo", "--baseline", "--size", "12", "--views", "9", "--points", "60", "--iterations", "8",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "| 3DGS |" in out and "LocoGS |" not in out
    assert (tmp_path / "baseline_test0.png").exists() and (tmp_path / "baseline.ply").exists()


@pytest.fixture(scope="module")
def tiny_scene():
    from iclr25.locogs.data.synthetic import make_synthetic_scene

    return make_synthetic_scene(n_views=9, width=12, height=12, n_points=60, seed=0)


@pytest.mark.integration
@pytest.mark.parametrize("fmt,method", [("colmap", "locogs"), ("blender", "3dgs")])
def test_train_render_eval_on_a_user_scene(tmp_path, tiny_scene, fmt, method):
    """The user-scene commands on a generated dataset written in the official formats: train writes the model,
    render writes one PNG per view, eval's PSNR equals rendering the saved model independently."""
    import json

    import torch

    from iclr25.locogs import psnr, render
    from iclr25.locogs.codec import decompress
    from iclr25.locogs.data.blender import save_blender_scene
    from iclr25.locogs.data.colmap import save_colmap_scene
    from iclr25.locogs.data.ply import read_3dgs_ply, save_point_cloud

    data, run = tmp_path / "data", tmp_path / "run"
    if fmt == "colmap":
        save_colmap_scene(tiny_scene, data)
        extra = ["--log2-hashmap", "8"]
    else:
        save_blender_scene(tiny_scene, data)
        save_point_cloud(data / "points.ply", tiny_scene.points, tiny_scene.colors)
        extra = ["--points", str(data / "points.ply")]
    assert (
        main(["train", "--scene", str(data), "--method", method, "--iterations", "6", "--out", str(run), *extra]) == 0
    )
    model = run / ("scene.locogs" if method == "locogs" else "model.ply")
    info = json.loads((run / "train.json").read_text())
    assert model.exists() and info["bytes"] == os.path.getsize(model) and info["method"] == method
    pts = extra[-2:] if fmt == "blender" else []
    assert main(["render", "--model", str(model), "--scene", str(data), "--split", "all", "--out",
                 str(tmp_path / "png"), *pts]) == 0  # fmt: skip
    assert len(list((tmp_path / "png").glob("*.png"))) == 9
    assert main(["eval", "--model", str(model), "--scene", str(data), "--out", str(tmp_path / "m.json"), *pts]) == 0
    res = json.loads((tmp_path / "m.json").read_text())
    g = decompress(model) if method == "locogs" else read_3dgs_ply(model)
    from iclr25.locogs.cli import load_scene

    views = load_scene(data, points=pts[-1] if pts else None).test()
    with torch.no_grad():
        expect = sum(psnr(render(g, c).image.clamp(0, 1), gt) for c, gt in views) / len(views)
    assert res["n_views"] == len(views) == len(tiny_scene.test_idx)
    assert abs(res["psnr"] - expect) < 1e-6 and 0 < res["ssim"] <= 1


def test_user_scene_commands_reject_bad_paths(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no such file"):
        main(["eval", "--model", str(tmp_path / "x.locogs"), "--scene", str(tmp_path / "empty")])
    with pytest.raises(SystemExit, match="neither a Blender dataset"):
        main(["train", "--scene", str(tmp_path / "empty"), "--out", str(tmp_path / "run")])
    with pytest.raises(SystemExit, match="not a folder"):
        main(["train", "--scene", str(tmp_path / "missing"), "--out", str(tmp_path / "run")])
    (tmp_path / "m.bin").write_bytes(b"x")
    with pytest.raises(SystemExit, match="expected a .locogs file or a 3DGS .ply"):
        main(["render", "--model", str(tmp_path / "m.bin"), "--scene", str(tmp_path / "empty"), "--out", "o"])
