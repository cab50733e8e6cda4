"""Helpers of the TEAL benchmarks: CPU environment (ISA, threads, load) and robust summaries of interleaved repeats.

Benchmarks time every configuration once per round, round after round (interleaved), after a warm-up round, and
report medians with their spread; ratios are taken within a round (same machine state) and then summarised.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence


def cpu_environment() -> dict:
    """ISA torch dispatches to (``torch.backends.cpu.get_cpu_capability()``: AVX2 / AVX512 / AMX ...), the intra-op
    thread count, the visible cores and the 1/5/15-minute load average (a loaded shared machine inflates spreads)."""
    import torch

    try:
        load = list(os.getloadavg())
    except OSError:  # not available on this platform
        load = None
    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
        "onednn_max_cpu_isa_env": os.environ.get("ONEDNN_MAX_CPU_ISA"),
    }


def summarize(values: Sequence[float]) -> dict:
    """Median, min, max, first/third quartile and count of ``values`` (seconds, rates or ratios)."""
    v = sorted(float(x) for x in values)
    if not v:
        raise ValueError("summarize needs at least one value")
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"median": statistics.median(v), "min": v[0], "max": v[-1], "q1": q1, "q3": q3, "n": len(v)}


def ratio_summary(numerators: Sequence[float], denominators: Sequence[float]) -> dict:
    """Summary of the per-round ratios ``numerators[i] / denominators[i]`` (both timed in the same round)."""
    if len(numerators) != len(denominators):
        raise ValueError(f"need as many numerators as denominators, got {len(numerators)} and {len(denominators)}")
    return summarize([a / b for a, b in zip(numerators, denominators)])


def fmt_spread(s: dict, digits: int = 2) -> str:
    """``median [min-max]`` of a :func:`summarize` result."""
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"
