"""Traffic of a randomised fleet: the sample fleet's daily curve moved to the fleet's peak hour, and request
sizes drawn with the fleet's own medians and scheduler cap."""

from __future__ import annotations

import numpy as np

from ..plan import DAY_MS, HOUR_MS
from ..traffic import BATCHES, HOURLY, WEEKDAY, Requests
from .spec import Traffic

HOURLY_PEAK = 2.5  # the sample curve peaks at 02:00-03:00


def load_shape(ts_ms: np.ndarray, peak_hour_utc: float) -> np.ndarray:
    """Relative load at each time: the hourly curve shifted so that it peaks at `peak_hour_utc`."""
    hours = ((ts_ms % DAY_MS) / HOUR_MS - (peak_hour_utc - HOURLY_PEAK)) % 24
    lo = np.floor(hours).astype(int) % 24
    frac = hours - np.floor(hours)
    hourly = HOURLY[lo] * (1 - frac) + HOURLY[(lo + 1) % 24] * frac
    return hourly * WEEKDAY[((ts_ms // DAY_MS) + 3) % 7]  # 1970-01-01 was a Thursday


def arrivals(start_ms: int, end_ms: int, per_day: float, peak_hour_utc: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted arrival times (ms): a Poisson count per minute following the load curve."""
    minutes = np.arange(start_ms, end_ms, 60_000, dtype=np.int64)
    shape = load_shape(minutes, peak_hour_utc)
    expected = per_day * (end_ms - start_ms) / DAY_MS
    counts = rng.poisson(expected * shape / shape.sum())
    starts = np.repeat(minutes, counts)
    return np.sort(starts + rng.integers(0, 60_000, len(starts)))


def features(ts: np.ndarray, traffic: Traffic, rng: np.random.Generator) -> Requests:
    """Batch sizes and log-normal prompt and output lengths; the scheduler splits a batch above its cap."""
    n = len(ts)
    batch = rng.choice(BATCHES, n, p=np.array(traffic.batch_p))
    inp = np.clip(np.exp(rng.normal(np.log(traffic.prompt_median), traffic.prompt_sigma, n)), 8, traffic.max_prompt)
    out = np.clip(np.exp(rng.normal(np.log(traffic.output_median), 0.8, n)), 1, 2048)
    inp, out = inp.astype(np.int64), out.astype(np.int64)
    inp = np.minimum(inp, traffic.max_batched_tokens - out)  # one sequence always fits the scheduler
    fits = traffic.max_batched_tokens // (inp + out)
    batch = np.minimum(batch, 2 ** np.floor(np.log2(fits)).astype(np.int64))
    return Requests(ts, batch.astype(np.int64), inp, out)


def token_sample(traffic: Traffic, seed: int, n: int = 20_000) -> Requests:
    """A fixed sample of request sizes, to place thresholds and neighbours before simulating."""
    return features(np.zeros(n, dtype=np.int64), traffic, np.random.default_rng(np.random.SeedSequence([seed, 5])))
