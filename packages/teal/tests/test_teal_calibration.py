"""Calibration oracles: closed-form thresholds, the official histogram layout, realized sparsity, persistence."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.teal import ActivationHistogram, CalibrationConfig, CalibrationResult, calibrate, load_teal_histograms
from iclr25.teal.calibration import abs_order_statistics
from iclr25.teal.config import DISTRIBUTIONS


def _symmetric(sample: torch.Tensor) -> torch.Tensor:
    return torch.cat([sample, -sample])  # an exactly symmetric empirical distribution


@pytest.mark.parametrize("s", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("mode", ["teal_symmetric", "abs_quantile"])
def test_gaussian_thresholds_match_closed_form(s, mode):
    sigma = 1.7
    x = torch.randn(300_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * sigma
    t = ActivationHistogram.from_values(x).threshold(s, mode)
    expected = sigma * float(torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(0.5 + s / 2, dtype=torch.float64)))
    assert t == pytest.approx(expected, rel=5e-3 if mode == "abs_quantile" else 1.5e-2)  # signed icdf: +asymmetry noise


@pytest.mark.parametrize("s", [0.25, 0.5, 0.9])
@pytest.mark.parametrize("mode", ["teal_symmetric", "abs_quantile"])
def test_laplace_thresholds_match_closed_form(s, mode):
    b = 0.3
    x = torch.distributions.Laplace(0.0, b).sample((300_000,)).double()
    t = ActivationHistogram.from_values(x).threshold(s, mode)
    assert t == pytest.approx(-b * math.log(1 - s), rel=1e-2)


def test_skewed_mixture_only_abs_quantile_hits_the_target():
    g = torch.Generator().manual_seed(2)
    x = torch.cat([torch.randn(600_000, generator=g) * 0.5 + 0.8, torch.randn(400_000, generator=g) * 2.0 - 1.0])
    h = ActivationHistogram.from_values(x)
    realized = {m: float((x.abs() <= h.threshold(0.5, m)).double().mean()) for m in ("teal_symmetric", "abs_quantile")}
    assert realized["abs_quantile"] == pytest.approx(0.5, abs=2e-4)
    assert abs(realized["teal_symmetric"] - 0.5) > 0.02  # the symmetric icdf assumes a zero-mean distribution


def test_official_histogram_layout():
    x = torch.randn(200_000, generator=torch.Generator().manual_seed(3))
    h = ActivationHistogram.from_values(x)
    assert h.counts.numel() == 10_000 and h.total == x.numel()
    sx = torch.sort(x).values.double()
    k = int(0.01 * x.numel())
    edges_from_centers_inner = h.centers[1:-1]  # inner bins are equal width between the 1 % / 99 % order stats
    widths = torch.diff(edges_from_centers_inner)
    assert torch.allclose(widths, widths.mean().expand_as(widths), rtol=1e-6)
    width = float(widths.mean())
    assert float(h.centers[1]) == pytest.approx(float(sx[k]) + width / 2, rel=1e-6)
    assert float(h.centers[-2]) == pytest.approx(float(sx[-k]) - width / 2, rel=1e-6)
    assert float(h.centers[0]) == pytest.approx((float(sx[0]) + float(sx[k])) / 2)  # outer bins reach min / max
    assert float(h.centers[-1]) == pytest.approx((float(sx[-k]) + float(sx[-1])) / 2)
    # counts agree with torch.histogram on the same edges
    edges = torch.cat([sx[:1], torch.linspace(float(sx[k]), float(sx[-k]), 9_999, dtype=torch.float64), sx[-1:]])
    ref_counts, _ = torch.histogram(x.double(), bins=edges)
    assert torch.equal(h.counts, ref_counts)


@pytest.mark.parametrize("s", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_realized_sparsity_on_calibration_data_within_one_bin(s):
    x = _symmetric(torch.distributions.StudentT(3.0).sample((100_000,)))
    h = ActivationHistogram.from_values(x)
    n = x.numel()
    t_abs = h.threshold(s, "abs_quantile")
    assert abs(float((x.abs() <= t_abs).double().mean()) - s) <= 1e-4 + 1 / n  # one |x| grid step
    t_teal = h.threshold(s, "teal_symmetric")  # exactly symmetric data: one histogram bin of mass
    target_count = (0.5 + s / 2) * n
    idx = int(torch.searchsorted(h.cumulative, torch.tensor([target_count], dtype=torch.float64)))
    bin_mass = 2 * float(h.counts[max(idx - 1, 0) : idx + 1].max()) / n
    assert abs(float((x.abs() <= t_teal).double().mean()) - s) <= bin_mass + 2 / n


def test_sparsity_zero_gives_threshold_zero_and_bad_levels_raise():
    h = ActivationHistogram.from_values(torch.randn(1000))
    assert h.threshold(0.0) == 0.0 and h.threshold(0.0, "abs_quantile") == 0.0
    for bad in (-0.1, 1.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"\[0, 1\)"):
            h.threshold(bad)
    with pytest.raises(ValueError, match="mode"):
        h.threshold(0.5, "topk")


def test_abs_order_statistics_brute_force():
    g = torch.Generator().manual_seed(4)
    for n in (1, 2, 3, 10, 257):
        for x in (torch.randn(n, generator=g), torch.randint(-2, 3, (n,), generator=g).float(), torch.rand(n) + 1):
            got = abs_order_statistics(torch.sort(x).values, torch.arange(1, n + 1))
            assert torch.equal(got, torch.sort(x.abs()).values.double())


def test_histogram_rejects_bad_values():
    with pytest.raises(ValueError, match="NaN"):
        ActivationHistogram.from_values(torch.tensor([1.0, float("nan"), 2.0]))
    with pytest.raises(ValueError, match="at least 2"):
        ActivationHistogram.from_values(torch.tensor([1.0]))
    counts, centers = torch.ones(5), torch.linspace(-1, 1, 5)
    ActivationHistogram(counts, centers)  # a valid (e.g. official-file) histogram
    for bad_value in (float("nan"), float("inf")):
        bad = centers.clone()
        bad[2] = bad_value
        with pytest.raises(ValueError, match=r"centres must be finite numbers, got 1 NaN/inf"):
            ActivationHistogram(counts, bad)
    with pytest.raises(ValueError, match="sorted"):
        ActivationHistogram(counts, centers.flip(0))
    with pytest.raises(ValueError, match="counts must be finite and non-negative"):
        ActivationHistogram(torch.tensor([1.0, -1.0, 1.0, 1.0, 1.0]), centers)


def test_calibrate_captures_the_four_distributions(tiny_llama, tiny_batches):
    from iclr25.teal import capture_activations

    acts = capture_activations(tiny_llama, tiny_batches)
    tokens = sum(b.numel() for b in tiny_batches)
    assert set(acts) == {(layer, d) for layer in range(2) for d in DISTRIBUTIONS}
    assert acts[(0, "attn_h1")].numel() == tokens * 32 and acts[(1, "mlp_h2")].numel() == tokens * 72
    # mlp h2 is SiLU(gate(x)) * up(x) of the dense model, computed independently here
    captured = {}
    layer = tiny_llama.model.layers[1]
    hook = layer.mlp.register_forward_pre_hook(lambda m, a: captured.setdefault("x", a[0]))
    with torch.no_grad():
        for b in tiny_batches:
            tiny_llama(input_ids=b)
            x = captured.pop("x")
            h2 = torch.nn.functional.silu(layer.mlp.gate_proj(x)) * layer.mlp.up_proj(x)
            captured.setdefault("h2", []).append(h2.reshape(-1))
    hook.remove()
    assert torch.allclose(torch.cat(captured["h2"]), acts[(1, "mlp_h2")], atol=1e-6)


def test_calibrate_bad_input(tiny_llama):
    with pytest.raises(ValueError, match="empty"):
        calibrate(tiny_llama, [])
    with pytest.raises(ValueError, match="LongTensor"):
        calibrate(tiny_llama, [torch.randn(2, 8)])
    with pytest.raises(ValueError, match="Llama-style"):
        calibrate(torch.nn.Sequential(torch.nn.Linear(3, 3)), [torch.zeros(1, 4, dtype=torch.long)])


def test_save_load_roundtrip_and_official_layout(tmp_path, tiny_llama, tiny_batches):
    calib = calibrate(tiny_llama, tiny_batches, CalibrationConfig(num_bins=500, num_abs_quantiles=101))
    calib.save(tmp_path / "calib.pt")
    back = CalibrationResult.load(tmp_path / "calib.pt")
    for layer in range(2):
        for proj in ("q", "o", "up", "down"):
            for mode in ("teal_symmetric", "abs_quantile"):
                assert back.threshold(layer, proj, 0.4, mode) == calib.threshold(layer, proj, 0.4, mode)
    calib.save_teal_histograms(tmp_path / "histograms")
    state = torch.load(tmp_path / "histograms" / "layer-1" / "mlp" / "histograms.pt", weights_only=True)
    assert set(state) == {"h1", "h1_centers", "h2", "h2_centers"}
    official = load_teal_histograms(tmp_path / "histograms")
    assert official.num_layers == 2
    # float32 files: the official icdf on them matches ours to float32 precision
    assert official.threshold(1, "down", 0.5) == pytest.approx(calib.threshold(1, "down", 0.5), rel=1e-5)
    with pytest.raises(ValueError, match="no \\|x\\| quantiles"):
        official.threshold(0, "q", 0.5, "abs_quantile")


def test_loaders_reject_bad_files(tmp_path):
    with pytest.raises(ValueError, match="no calibration file"):
        CalibrationResult.load(tmp_path / "missing.pt")
    torch.save({"x": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not an iclr25.teal calibration"):
        CalibrationResult.load(tmp_path / "other.pt")
    (tmp_path / "h" / "layer-0" / "mlp").mkdir(parents=True)
    with pytest.raises(ValueError, match="missing"):
        load_teal_histograms(tmp_path / "h")
    with pytest.raises(ValueError, match="no layer"):
        load_teal_histograms(tmp_path / "h" / "layer-0")


def test_capture_subsamples_to_bound_memory(tiny_llama, make_batches):
    from iclr25.teal import capture_activations

    batches = make_batches(n_batches=4)
    full = capture_activations(tiny_llama, batches)
    sub = capture_activations(tiny_llama, batches, max_values=2000, seed=1)
    for key, values in full.items():
        assert abs(sub[key].numel() - 2000) < 300  # Bernoulli subsample of ~2000 values
        h_full, h_sub = ActivationHistogram.from_values(values), ActivationHistogram.from_values(sub[key])
        t_full = h_full.threshold(0.5, "abs_quantile")
        assert h_sub.threshold(0.5, "abs_quantile") == pytest.approx(t_full, rel=0.1)
    calib = calibrate(tiny_llama, batches, CalibrationConfig(max_values=2000))
    assert calib.histograms[(0, "mlp_h2")].total < 2300


OFFICIAL = {  # design note §5.5: F^-1(0.5 + s/2) on the official layer-15 files, s = 0.25 and 0.5
    "Llama-2-7B": {"gate": (0.07853, 0.16792), "down": (0.00976, 0.02760), "q": (0.10832, 0.23342),
                   "o": (0.01681, 0.04446)},
    "Mistral-7B": {"gate": (0.47654, 1.01501), "q": (0.56709, 1.21918)},
}  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize("model", sorted(OFFICIAL))
def test_official_calibration_files_give_the_official_thresholds(model):
    """Set ICLR25_TEAL_OFFICIAL_MODELS to the `models/` folder of FasterDecoding/TEAL (not shipped: 30 MB)."""
    import os
    from pathlib import Path

    root = os.environ.get("ICLR25_TEAL_OFFICIAL_MODELS")
    if not root or not (Path(root) / model / "histograms").is_dir():
        pytest.skip("ICLR25_TEAL_OFFICIAL_MODELS does not point at the official models/ folder")
    calib = load_teal_histograms(Path(root) / model / "histograms")
    assert calib.num_layers == 32
    for proj, expected in OFFICIAL[model].items():
        got = tuple(calib.threshold(15, proj, s) for s in (0.25, 0.5))
        assert got == pytest.approx(expected, abs=1e-5)
