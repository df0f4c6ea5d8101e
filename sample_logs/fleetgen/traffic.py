"""Request arrivals with a diurnal and weekly shape, and the prompt features of each request."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .plan import DAY_MS, FleetPlan, Instance

# Relative load by UTC hour: the users are mostly in UTC+8, so the peak is 01:00-04:00 UTC (their
# morning) and the trough 18:00-20:00 UTC (their night). The nightly backup lands on the peak.
HOURLY = np.array(
    [
        0.75,
        0.95,
        1.0,
        1.0,
        0.95,
        0.85,
        0.9,
        0.95,
        0.9,
        0.75,
        0.6,
        0.5,
        0.5,
        0.55,
        0.6,
        0.55,
        0.45,
        0.35,
        0.28,
        0.25,
        0.27,
        0.35,
        0.48,
        0.62,
    ]
)
WEEKDAY = np.array([1.0, 1.02, 1.03, 1.0, 0.95, 0.7, 0.62])  # Monday first
BATCHES = np.array([1, 2, 4, 8, 16])
BATCH_P = np.array([0.38, 0.26, 0.18, 0.12, 0.06])
MAX_BATCHED_TOKENS = 65_536  # the scheduler never batches more than this many (in + out) tokens


@dataclass
class Requests:
    """Arrival times (epoch ms, sorted) and prompt features of one instance's requests."""

    ts: np.ndarray
    batch: np.ndarray
    inp: np.ndarray
    out: np.ndarray

    @property
    def tokens(self) -> np.ndarray:
        """batch x (input + output): what the peak memory grows with."""
        return self.batch * (self.inp + self.out)

    def take(self, mask: np.ndarray) -> Requests:
        """The requests where `mask` holds."""
        return Requests(self.ts[mask], self.batch[mask], self.inp[mask], self.out[mask])


def load_shape(minute_ms: np.ndarray) -> np.ndarray:
    """Relative load at each minute (epoch ms): hourly profile interpolated, times the weekday factor."""
    hours = (minute_ms % DAY_MS) / 3_600_000
    lo = np.floor(hours).astype(int)
    frac = hours - lo
    hourly = HOURLY[lo] * (1 - frac) + HOURLY[(lo + 1) % 24] * frac
    weekday = WEEKDAY[((minute_ms // DAY_MS) + 3) % 7]  # 1970-01-01 was a Thursday
    return hourly * weekday


def arrivals(plan: FleetPlan, inst: Instance, rng: np.random.Generator) -> np.ndarray:
    """Sorted arrival times (ms): a Poisson count per minute following load_shape, uniform within it."""
    minutes = np.arange(plan.start_ms, plan.end_ms, 60_000, dtype=np.int64)
    shape = load_shape(minutes)
    counts = rng.poisson(plan.expected_requests(inst) * shape / shape.sum())
    starts = np.repeat(minutes, counts)
    return np.sort(starts + rng.integers(0, 60_000, len(starts)))


def features(ts: np.ndarray, rng: np.random.Generator) -> Requests:
    """Batch sizes and log-normal prompt and output lengths, capped at MAX_BATCHED_TOKENS per batch."""
    n = len(ts)
    batch = rng.choice(BATCHES, n, p=BATCH_P)
    inp = np.clip(np.exp(rng.normal(np.log(700), 1.0, n)), 8, 8192).astype(np.int64)
    out = np.clip(np.exp(rng.normal(np.log(180), 0.8, n)), 1, 2048).astype(np.int64)
    fits = MAX_BATCHED_TOKENS // (inp + out)  # the scheduler splits a batch that would not fit
    batch = np.minimum(batch, 2 ** np.floor(np.log2(fits)).astype(np.int64))
    return Requests(ts, batch.astype(np.int64), inp, out)


def latency_ms(req: Requests, fast: bool, failed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Prefill plus decode time; a failed request stops during prefill. A100s run about 1.8x faster."""
    prefill = 12 + 0.012 * req.batch * req.inp
    decode = req.out * (16 + 0.9 * req.batch)
    lat = np.where(failed, prefill * rng.uniform(0.2, 0.9, len(req.ts)), prefill + decode)
    lat = lat * np.exp(rng.normal(0, 0.08, len(req.ts))) * (0.55 if fast else 1.0)
    return np.round(lat, 1)
