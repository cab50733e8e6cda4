"""Benchmark helpers: summaries of interleaved repeats (median, spread) and the recorded CPU environment."""

from __future__ import annotations

import pytest
import torch

from iclr25.teal.benchutil import cpu_environment, fmt_spread, ratio_summary, summarize


def test_summaries_of_repeats():
    s = summarize([3.0, 1.0, 2.0, 10.0, 4.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (3.0, 1.0, 10.0, 5)
    assert (s["q1"], s["q3"]) == (2.0, 4.0)
    assert summarize([2.5]) == {"median": 2.5, "min": 2.5, "max": 2.5, "q1": 2.5, "q3": 2.5, "n": 1}
    r = ratio_summary([2.0, 3.0, 8.0], [1.0, 2.0, 4.0])  # per-round ratios 2, 1.5, 2
    assert (r["median"], r["min"], r["max"]) == (2.0, 1.5, 2.0)
    assert fmt_spread(r) == "2.00 [1.50-2.00]"
    with pytest.raises(ValueError, match="at least one"):
        summarize([])
    with pytest.raises(ValueError, match="as many"):
        ratio_summary([1.0], [1.0, 2.0])


def test_cpu_environment_records_isa_and_threads():
    env = cpu_environment()
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["threads"] == torch.get_num_threads() and env["cpu_count"] >= 1
