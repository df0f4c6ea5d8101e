"""Exact tests for OOM counts against traffic: Poisson excess, two-rate comparison, Holm correction."""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats


def poisson_excess_p(observed: int, expected: float) -> float:
    """P(X >= observed) for X ~ Poisson(expected): how surprising a count this high is."""
    if observed <= 0:
        return 1.0
    if expected <= 0:
        # OOMs where no traffic was seen: the data disagree with themselves, not evidence of an excess
        return 1.0
    return float(stats.poisson.sf(observed - 1, expected))


def rate_ratio_p(ooms_in: int, exposure_in: float, ooms_out: int, exposure_out: float) -> float:
    """One-sided exact test that the inside rate exceeds the outside rate.

    Conditional on the total, OOMs inside are Binomial(total, share of exposure inside) when both rates
    are equal (the exact test for two Poisson rates); it needs only the shape of the exposure, so an
    estimated traffic profile works as well as counted requests.
    """
    total = ooms_in + ooms_out
    exposure = exposure_in + exposure_out
    if ooms_in <= 0 or exposure_in <= 0 or exposure_out <= 0:
        return 1.0
    return float(stats.binom.sf(ooms_in - 1, total, exposure_in / exposure))


def rate_ratio(ooms_in: int, exposure_in: float, ooms_out: int, exposure_out: float) -> float | None:
    """Inside rate over outside rate (the lift); None when either rate is undefined or the outside is 0."""
    if exposure_in <= 0 or exposure_out <= 0 or ooms_out <= 0:
        return None
    return (ooms_in / exposure_in) / (ooms_out / exposure_out)


def pooled_rate_ratio(strata: Sequence[tuple[int, float, int, float]]) -> float | None:
    """Mantel-Haenszel rate ratio over strata of (ooms_in, exposure_in, ooms_out, exposure_out).

    Each stratum (a host) is weighted by its own traffic, so hosts of different size and hosts measured
    only by a traffic profile combine without one rate dominating.
    """
    numerator = denominator = 0.0
    for ooms_in, exposure_in, ooms_out, exposure_out in strata:
        total = exposure_in + exposure_out
        if exposure_in <= 0 or exposure_out <= 0:
            continue
        numerator += ooms_in * exposure_out / total
        denominator += ooms_out * exposure_in / total
    return numerator / denominator if denominator > 0 else None


def expected_inside(strata: Sequence[tuple[int, float, int, float]]) -> float:
    """OOMs expected inside if each stratum's OOMs fell in proportion to its traffic."""
    return sum((oi + oo) * xi / (xi + xo) for oi, xi, oo, xo in strata if xi + xo > 0)


def pooled_excess_p(strata: Sequence[tuple[int, float, int, float]]) -> float:
    """P-value of the OOMs inside summed over strata against their traffic-proportional expectation."""
    usable = [s for s in strata if s[1] > 0 and s[3] > 0]
    return poisson_excess_p(sum(s[0] for s in usable), expected_inside(usable))


def format_p(p_value: float) -> str:
    """A p-value for people: two significant digits, and a floor where floating point runs out."""
    return "< 1e-300" if p_value < 1e-300 else f"= {p_value:.2g}"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (controls the family-wise error rate)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def format_lift(lift: float | None) -> str:
    """A lift for people; None means no OOM (or no traffic) outside, where a ratio says nothing."""
    return "n/a" if lift is None else f"{lift:.1f}x"
