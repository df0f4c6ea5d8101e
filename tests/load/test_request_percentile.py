"""agg_request_devices finds a device's 95th percentile of request needs from a histogram of fine buckets and the
values of the one or two buckets that hold the ranks, not from one exact quantile aggregate (which on Spark holds
all of a device's values at once). It must equal DuckDB's quantile_cont, rounded to a byte, on any needs:
repeated values, negative ones (a peak below what the request started from), NULLs and OOMs left out, a device
with one value or none, needs across many powers of two and within one bucket. The sample fleet's devices are
compared on both engines by test_aggregate_engines."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab.load.connection import connect

_START = datetime(2026, 11, 2)
_NEED = st.one_of(
    st.integers(-(2**20), 2**20),  # small and negative: every value its own bucket below 256
    st.integers(2**20, 2**40),  # many powers of two
    st.integers(5 * 2**30, 5 * 2**30 + 2**20),  # within one or two fine buckets: many values ranked there
    st.none(),
)
_REQUEST = st.tuples(st.sampled_from(["gpu-a", "gpu-b", None]), st.integers(0, 1), _NEED, st.booleans())

_EXACT = """
    SELECT instance, gpu_index,
           CAST(round(quantile_cont(peak_allocated - allocated_before, 0.95) FILTER (WHERE NOT is_oom)) AS BIGINT)
    FROM stg_requests GROUP BY instance, gpu_index ORDER BY ALL
"""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_REQUEST, min_size=1, max_size=400), st.integers(0, 1 << 30))
def test_the_bucketed_percentile_is_quantile_cont(requests, base) -> None:
    with connect(":memory:") as con:
        rows = [
            (
                _START + timedelta(seconds=i),
                instance,
                gpu,
                "oom" if oom else "ok",
                base,
                None if need is None else base + need,
                i,
            )
            for i, (instance, gpu, need, oom) in enumerate(requests)
        ]
        con.executemany(
            "INSERT INTO requests (ts, instance, gpu_index, status, allocated_before, peak_allocated, source_id, line) "
            "VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
            rows,
        )
        got = con.execute(
            "SELECT instance, gpu_index, p95_request_bytes FROM agg_request_devices ORDER BY ALL"
        ).fetchall()
        assert got == con.execute(_EXACT).fetchall()


def test_a_device_of_equal_needs_and_one_of_a_single_need() -> None:
    with connect(":memory:") as con:
        con.execute(
            "INSERT INTO requests (ts, instance, gpu_index, status, allocated_before, peak_allocated, source_id, line) "
            "SELECT TIMESTAMP '2026-11-02' + to_seconds(i), 'same', 0, 'ok', 10, 10 + 3000000000, 1, i "
            "FROM range(1000) AS t(i) "
            "UNION ALL SELECT TIMESTAMP '2026-11-02', 'one', 0, 'ok', 0, 12345, 1, 5000"
        )
        got = dict(con.execute("SELECT instance, p95_request_bytes FROM agg_request_devices").fetchall())
    assert got == {"same": 3000000000, "one": 12345}
