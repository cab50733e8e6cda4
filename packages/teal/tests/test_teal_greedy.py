"""Greedy allocation invariants (design note §5.6) on a synthetic block and on the trained small model."""

from __future__ import annotations

import pytest
import torch

from iclr25.teal import (
    GreedyConfig,
    GreedyTable,
    block_error,
    calibrate,
    greedy_allocation,
    greedy_block_allocation,
    projection_weights,
)
from iclr25.teal.config import PROJECTIONS
from iclr25.teal.greedy import CSV_HEADER

WEIGHTS = {"q": 1.0, "k": 0.25, "v": 0.25, "o": 1.0, "gate": 3.5, "up": 3.5, "down": 3.5}


class SyntheticBlock:
    """A 'block' whose output degrades with each projection's sparsity at a different, known rate."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.base = torch.randn(2, 16, 8, generator=g)
        self.dirs = {p: torch.randn(2, 16, 8, generator=g) for p in PROJECTIONS}
        self.rate = {"q": 1.0, "k": 3.0, "v": 2.0, "o": 0.7, "gate": 0.5, "up": 0.6, "down": 0.4}
        self.calls = 0

    def __call__(self, levels):
        self.calls += 1
        out = self.base.clone()
        for p, s in levels.items():
            out = out + self.rate[p] * s**2 * self.dirs[p]
        return out


def test_block_error_is_l2_over_the_last_positions():
    ref = torch.zeros(2, 8, 3)
    out = torch.zeros(2, 8, 3)
    out[:, 5] = 1.0  # position 5 is outside the last 25 % (positions 6, 7)
    assert block_error(ref, out) == 0.0
    out[0, 7, 0] = 3.0
    out[0, 6, 0] = 4.0  # norm over positions 6, 7 of channel 0 in batch 0 = 5; mean over 2 x 3
    assert block_error(ref, out) == pytest.approx(5.0 / 6)


def test_greedy_invariants_on_a_synthetic_block():
    block = SyntheticBlock()
    cfg = GreedyConfig(base_step=0.05, target=0.6)
    table = greedy_block_allocation(block, WEIGHTS, cfg)
    total_w = sum(WEIGHTS.values())
    ref = block({p: 0.0 for p in PROJECTIONS})
    prev = 0.0
    prev_levels = {p: 0.0 for p in PROJECTIONS}
    assert table.rows
    for row in table.rows:
        # each committed step raises S_eff by exactly one weighted step
        assert row.effective - prev == pytest.approx(cfg.base_step / total_w, abs=1e-12)
        prev = row.effective
        # per-projection levels are multiples of their step, only the chosen one moved, all in [0, 1)
        for p in PROJECTIONS:
            n = row.levels[p] / (cfg.base_step / WEIGHTS[p])
            assert n == pytest.approx(round(n), abs=1e-9) and 0 <= row.levels[p] < 1
        moved = [p for p in PROJECTIONS if row.levels[p] != prev_levels[p]]
        assert moved == [row.chosen]
        # the choice is the arg-min of the recomputed errors of all admissible candidates (brute force)
        brute = {}
        for p in PROJECTIONS:
            trial = dict(prev_levels)
            trial[p] += cfg.base_step / WEIGHTS[p]
            if trial[p] < 1 - 1e-9:
                brute[p] = block_error(ref, block(trial))
        assert row.chosen == min(brute, key=brute.get)
        assert row.error == pytest.approx(brute[row.chosen])
        assert sum(WEIGHTS[p] * row.levels[p] for p in PROJECTIONS) / total_w == pytest.approx(row.effective)
        prev_levels = dict(row.levels)
    assert table.rows[-1].effective >= 0.6 - 1e-9 and table.rows[-2].effective < 0.6


def test_greedy_table_closest_and_official_csv(tmp_path):
    table = greedy_block_allocation(SyntheticBlock(), WEIGHTS, GreedyConfig(target=0.3))
    level = 0.2
    best = min(table.rows, key=lambda r: abs(r.effective - level))
    assert table.closest(level) == best.levels
    assert table.closest(0.0) == {p: 0.0 for p in PROJECTIONS}
    table.to_csv(tmp_path / "layer-0" / "results.csv")
    header = (tmp_path / "layer-0" / "results.csv").read_text().splitlines()[0].split(",")
    assert header == CSV_HEADER == ["Effective Sparsity", "Activation Error", "Baseline Error", *PROJECTIONS]
    back = GreedyTable.from_csv(tmp_path / "layer-0" / "results.csv")
    assert [r.levels for r in back.rows] == [r.levels for r in table.rows]
    assert [r.effective for r in back.rows] == [r.effective for r in table.rows]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="official columns"):
        GreedyTable.from_csv(tmp_path / "bad.csv")


def test_greedy_rejects_bad_weights():
    with pytest.raises(ValueError, match="positive weight"):
        greedy_block_allocation(SyntheticBlock(), {"q": 1.0}, GreedyConfig())


def test_greedy_config_is_validated():
    GreedyConfig(last_fraction=1.0)  # the whole sequence: allowed
    for bad in (0.0, -0.25, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"last_fraction must (lie in \(0, 1\]|be a number)"):
            GreedyConfig(last_fraction=bad)
    with pytest.raises(ValueError, match="base_step"):
        GreedyConfig(base_step=0.0)
    with pytest.raises(ValueError, match="target"):
        GreedyConfig(target=1.0)
    with pytest.raises(ValueError, match="last_fraction"):
        block_error(torch.zeros(1, 3, 4), torch.ones(1, 3, 4), last_fraction=0.0)


def test_weights_from_real_parameter_counts(small_model):
    w = projection_weights(small_model)
    assert w == pytest.approx({"q": 1, "k": 0.5, "v": 0.5, "o": 1, "gate": 2.6875, "up": 2.6875, "down": 2.6875})


def test_greedy_beats_uniform_on_the_small_model(small_model, small_texts):
    calib_ids, _ = small_texts
    batches = [calib_ids[: 4 * 64].view(4, 64)]
    calib = calibrate(small_model, [calib_ids[4096:8192].view(-1, 128)])
    tables = greedy_allocation(small_model, calib, batches, GreedyConfig(target=0.3), layers=[1])
    rows = tables[1].rows
    assert rows[-1].effective >= 0.3 - 1e-9
    late = [r for r in rows if r.effective >= 0.15]
    # at equal effective sparsity the greedy block error is below uniform sparsity's
    assert all(r.error <= r.baseline_error * 1.0001 for r in late)
    assert rows[-1].error < rows[-1].baseline_error
    assert not any(isinstance(m, torch.nn.Module) and type(m).__name__ == "TealLinear" for m in small_model.modules())
