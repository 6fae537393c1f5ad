"""Order statistics the latency benchmarks print."""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0 < q < 1) of ``values``: the value at rank ``int(q * n)`` of the sorted
    values, the last one at most (no interpolation: a measured latency, never one between two)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
