"""A real Prometheus (Debian's `prometheus` package, which .ci/run installs) for the pull tests: loaded with
`promtool tsdb create-blocks-from openmetrics`, started on a free loopback port in a temporary folder, stopped when
the test ends. Without the binaries the tests are skipped with the reason, unless OOMLAB_REQUIRE_PROMETHEUS=1 (CI)
makes that a failure.

The samples loaded are derived from real DCGM exporter scrapes of tests/cases/realworld/telemetry/: the series'
labels are the scrape's own (its GPU repeated as the card's other indexes, with their own UUIDs); the values are the
scrape's, moved by a deterministic pattern over the days, so that every sample differs from its neighbours.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from oomlab.parse.telemetry.prom import Sample, read_samples

REQUIRED = os.environ.get("OOMLAB_REQUIRE_PROMETHEUS") == "1"
CASES = Path(__file__).parent / "cases" / "realworld" / "telemetry"
# A real DCGM exporter scrape of an A100 80GB under Kubernetes (its pod labels empty), and a vLLM v1 scrape.
DCGM_SCRAPE = CASES / "035_dcgm_prom_a100-k8s-empty-pod-labels" / "artifact.prom"
VLLM_SCRAPE = CASES / "043_vllm_prom_v1-engine-label-kv-cache" / "artifact.prom"
DCGM_METRICS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")  # the memory fields the real scrape has
EPOCH = datetime(1970, 1, 1)


def binaries() -> tuple[str, str]:
    """The prometheus and promtool paths, or a skip (a failure under OOMLAB_REQUIRE_PROMETHEUS=1)."""
    server, tool = shutil.which("prometheus"), shutil.which("promtool")
    if server is None or tool is None:
        reason = "prometheus / promtool not installed (apt-get install prometheus)"
        if REQUIRED:
            pytest.fail(f"OOMLAB_REQUIRE_PROMETHEUS=1 but {reason}")
        pytest.skip(reason)
    return server, tool


@dataclass(frozen=True)
class Loaded:
    """Samples loaded into the server: (metric, labels as a sorted tuple) -> [(time, value), ...]."""

    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[datetime, float]]]

    def samples(self, metric: str) -> dict[tuple[int, datetime], float]:
        """(gpu index, time) -> value of one metric."""
        return {
            (int(dict(labels)["gpu"]), when): value
            for (name, labels), points in self.series.items()
            if name == metric
            for when, value in points
        }


def dcgm_week(start: datetime, days: float, step_s: int, gpus: int = 8) -> tuple[str, Loaded]:
    """OpenMetrics text of `days` of DCGM samples every `step_s` seconds for `gpus` GPUs of the real scrape's
    node, and what it holds."""
    real = [s for s in read_samples(iter(DCGM_SCRAPE.read_text().splitlines())) if isinstance(s, Sample)]
    by_name = {s.name: s for s in real if s.name in DCGM_METRICS}
    steps = int(days * 86400 // step_s)
    lines: list[str] = []
    loaded: dict = {}
    for name in DCGM_METRICS:
        sample = by_name[name]
        lines.append(f"# TYPE {name} gauge")
        for gpu in range(gpus):
            labels = dict(sample.labels) | {"gpu": str(gpu), "UUID": f"{sample.labels['UUID'][:-2]}{gpu:02d}"}
            labels |= {"device": f"nvidia{gpu}"}
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            points = []
            for index in range(steps):
                when = start + timedelta(seconds=index * step_s)
                value = _moved(sample.value, name, index, gpu)
                points.append((when, value))
                lines.append(f"{name}{{{text}}} {value:g} {(when - EPOCH).total_seconds():.3f}")
            loaded[(name, tuple(sorted(labels.items())))] = points
    lines.append("# EOF")
    return "\n".join(lines) + "\n", Loaded(loaded)


def vllm_day(start: datetime, hours: float, step_s: int) -> tuple[str, list[tuple[datetime, float]]]:
    """OpenMetrics text of vLLM's KV-cache usage, the real v1 scrape's series (its engine and model labels), every
    `step_s` seconds for `hours`: the usage climbing from the scrape's value by 0.0005 a step, and what it holds."""
    (real,) = [
        s
        for s in read_samples(iter(VLLM_SCRAPE.read_text().splitlines()))
        if isinstance(s, Sample) and s.name == "vllm:kv_cache_usage_perc"
    ]
    text = ",".join(f'{k}="{v}"' for k, v in sorted(real.labels.items()))
    points = [
        (start + timedelta(seconds=i * step_s), round(real.value + i * 0.0005, 9))
        for i in range(int(hours * 3600 // step_s))
    ]
    lines = ["# TYPE vllm:kv_cache_usage_perc gauge"]
    lines += [f"vllm:kv_cache_usage_perc{{{text}}} {v!r} {(w - EPOCH).total_seconds():.3f}" for w, v in points]
    return "\n".join([*lines, "# EOF"]) + "\n", points


def _moved(value: float, name: str, index: int, gpu: int) -> float:
    """The real value moved by a pattern: memory by whole MiB within the card, utilisation within 0-100 %."""
    shift = (index * 7 + gpu * 131) % 997
    if name == "DCGM_FI_DEV_GPU_UTIL":
        return float((value + shift) % 101)
    if name == "DCGM_FI_DEV_FB_USED":
        return value + shift
    return max(0.0, value - shift)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def prometheus(
    folder: Path, openmetrics: str, *args: str, web_config: str | None = None, retention: str = "3650d"
) -> Iterator[Server]:
    """A Prometheus serving `openmetrics` (loaded into blocks first) from `folder`, on a free loopback port."""
    server, tool = binaries()
    data = folder / "tsdb"
    source = folder / "data.om"
    source.write_text(openmetrics)
    loaded = subprocess.run(
        [tool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h", str(source), str(data)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    config = folder / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    port = _free_port()
    command = [
        server,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.retention.time={retention}",
        *args,
    ]
    if web_config is not None:
        (folder / "web.yml").write_text(web_config)
        command.append(f"--web.config.file={folder / 'web.yml'}")
    log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - the server writes to it until stopped
    running = Server(f"http://127.0.0.1:{port}", subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
    try:
        _wait_ready(running, folder)
        yield running
    finally:
        running.stop()
        log.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_ready(server: Server, folder: Path, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError((folder / "prometheus.log").read_text()[-2000:])
        try:
            with urllib.request.urlopen(server.url + "/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # up, and asking for the credentials it was configured with
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"prometheus not ready after {limit_s} s: " + (folder / "prometheus.log").read_text()[-2000:])
