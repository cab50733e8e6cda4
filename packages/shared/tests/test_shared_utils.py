import json
import random

import numpy as np
import pytest
import torch

from iclr25.shared import (
    BenchStats,
    Timer,
    atomic_write,
    benchmark,
    make_rng,
    progress,
    seed_everything,
    write_result,
)
from iclr25.shared.testing import assert_close_ratio, tolerance


def test_seed_everything_makes_python_numpy_torch_repeat():
    seed_everything(7)
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    seed_everything(7)
    b = (random.random(), np.random.rand(), torch.rand(1).item())
    assert a == b
    seed_everything(8)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) != a
    with pytest.raises(ValueError):
        seed_everything(-1)


def test_make_rng():
    assert make_rng(3).integers(1 << 30) == make_rng(3).integers(1 << 30)
    g = np.random.default_rng(1)
    assert make_rng(g) is g
    with pytest.raises(ValueError):
        make_rng("x")


def test_atomic_write_replaces_on_success(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    with atomic_write(p, "w") as f:
        f.write("new")
    assert p.read_text() == "new"
    assert [q.name for q in p.parent.iterdir()] == ["f.txt"]


def test_atomic_write_file_mode(tmp_path):
    import os
    import stat

    fresh = tmp_path / "fresh"
    with atomic_write(fresh) as f:
        f.write(b"x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask  # as open() would create it, not mkstemp's 0600
    old = tmp_path / "old"
    old.write_bytes(b"a")
    old.chmod(0o640)
    with atomic_write(old) as f:
        f.write(b"b")
    assert stat.S_IMODE(old.stat().st_mode) == 0o640 and old.read_bytes() == b"b"


def test_atomic_write_keeps_old_file_when_writer_raises(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_write(p) as f:
            f.write(b"half")
            raise RuntimeError("writer failed")
    assert p.read_bytes() == b"old"
    assert [q.name for q in tmp_path.iterdir()] == ["f.bin"]  # no temp file left behind


def test_atomic_write_modes(tmp_path):
    p = tmp_path / "x"
    p.write_text("a")
    with pytest.raises(FileExistsError):
        with atomic_write(p, "x"):
            pass
    with pytest.raises(ValueError):
        with atomic_write(p, "a"):
            pass


def test_benchmark_and_timer():
    calls = []
    stats = benchmark(lambda: calls.append(1), warmup=2, repeat=5)
    assert isinstance(stats, BenchStats) and len(calls) == 7
    assert 0 <= stats.min <= stats.median <= stats.max and stats.repeat == 5
    with Timer() as t:
        sum(range(1000))
    assert t.elapsed >= 0
    with pytest.raises(ValueError):
        benchmark(lambda: None, repeat=0)


def test_write_result_schema(tmp_path):
    p = tmp_path / "r.json"
    rec = write_result(p, {"name": "x", "params": {"n": np.int64(3)}, "figures": {"t": np.float32(0.5), "v": [1, 2]}})
    back = json.loads(p.read_text())
    assert back == rec
    assert back["schema"] == "iclr25.bench/1" and back["params"] == {"n": 3} and back["figures"]["t"] == 0.5
    for key in ("device", "device_name", "torch", "triton", "numpy", "git_commit", "python"):
        assert key in back["env"]
    with pytest.raises(ValueError, match="missing"):
        write_result(p, {"name": "x"})


def test_progress_silent_unless_forced():
    data = [1, 2, 3]
    assert progress(data, force=False) is data
    bar = progress(data, force=True, disable=True)
    assert list(bar) == data and bar is not data


def test_assert_close_ratio():
    ref = torch.tensor([1.0, 2.0, 3.0])
    assert assert_close_ratio(ref, ref.clone()) == 0.0
    assert_close_ratio(ref, ref + 1e-7)
    with pytest.raises(AssertionError, match="relative RMS"):
        assert_close_ratio(ref, ref * 1.1, ratio=1e-3)
    with pytest.raises(AssertionError, match="NaN"):
        assert_close_ratio(ref, torch.tensor([1.0, float("nan"), 3.0]))
    with pytest.raises(AssertionError, match="shape"):
        assert_close_ratio(ref, ref[:2])
    assert_close_ratio(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))
    assert tolerance(torch.float32, "cuda") == (5e-3, 1e-5)
    with pytest.raises(ValueError):
        tolerance("int8")
