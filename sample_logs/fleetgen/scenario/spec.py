"""What a randomised scenario fixes before any request is drawn: hosts, versions, traffic, neighbours."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..plan import Card
from .models import Model
from .shapes import Shapes


@dataclass(frozen=True)
class Version:
    """A model version; a leaking one keeps `leak_per_request` bytes of every request it serves, and one that
    crashes on OOM dies at its first failed allocation (the supervisor starts it again)."""

    name: str
    family: str
    model: Model
    leak_per_request: int = 0
    leak_rate_per_hour: int = 0  # what the leak keeps per hour at its hosts' mean traffic
    crash_on_oom: bool = False


@dataclass(frozen=True)
class Fragmentation:
    """A host whose small long-lived blocks pin segments: after `warmup_ms` of a process, reserved holds all
    but `free_bytes` of the device and a request larger than the largest free block fails."""

    warmup_ms: int
    free_bytes: int
    largest_free_median: int
    prefix_cache: int  # bytes of small KV blocks allocated at start (a flat pool, not a leak)


@dataclass(frozen=True)
class Host:
    """One GPU (index 0) with one serving process at a time."""

    name: str
    card: Card
    pool: int
    log: str  # "requests": a structured request log; "text": the service's text log only
    requests_per_day: float
    deploys: tuple[tuple[int, int], ...]  # (epoch ms, version index), the first at the start
    fragmentation: Fragmentation | None = None
    cache_growth_per_day: int = 0  # empty_cache() is off: reserved creeps up, allocated stays flat


@dataclass(frozen=True)
class Neighbour:
    """Another process on some hosts: started by a scheduled job (`job`) or by hand (`job` None, no calendar)."""

    job: str | None
    process_name: str
    bytes: int
    hosts: tuple[str, ...]
    windows: tuple[tuple[int, int], ...]
    cron: str | None = None  # UTC; None: explicit occurrences
    duration_min: int = 0
    hosts_written: str = "*"  # how the calendar names the hosts: a glob, a bracket range, a `;` list


@dataclass(frozen=True)
class Decoy:
    """A scheduled job that holds no GPU memory and changes nothing."""

    name: str
    hosts: tuple[str, ...]
    windows: tuple[tuple[int, int], ...]
    cron: str | None
    duration_min: int
    hosts_written: str
    overlaps: str | None = None  # the neighbour job whose runs it overlaps on purpose (shape `overlap`)
    cadence: str | None = None  # "weekly" or "hourly" for such a decoy


@dataclass(frozen=True)
class Traffic:
    """Request sizes and the daily load curve of the fleet."""

    peak_hour_utc: float
    batch_p: tuple[float, ...]
    prompt_median: float
    prompt_sigma: float
    output_median: float
    max_prompt: int
    max_batched_tokens: int


@dataclass(frozen=True)
class Policy:
    """Who restarts a process: an operator when OOMs pile up, or the supervisor after a crash."""

    operator_ooms: int  # this many OOMs within operator_window_ms page the operator
    operator_window_ms: int
    operator_delay_ms: tuple[int, int]  # the operator restarts the process this long after the page
    restart_downtime_ms: int
    crash_downtime_ms: int
    deploy_downtime_ms: int = 120_000


@dataclass(frozen=True)
class Scenario:
    """Everything fixed before any request is drawn."""

    seed: int
    start_ms: int
    end_ms: int
    tz: str
    style: str  # timestamps: "utc_z", "naive_utc", "naive_local" (ingest with --tz) or "offset"
    peak_hour_local: float
    naming: str
    hosts: tuple[Host, ...]
    versions: tuple[Version, ...]
    traffic: Traffic
    policy: Policy
    non_pytorch: int
    efficiency: float
    neighbours: tuple[Neighbour, ...] = ()
    pool_prefixes: tuple[str, ...] = field(default_factory=tuple)
    shapes: Shapes | None = None  # None: a classic fleet (`--classic`), byte for byte what it always was

    @property
    def ingest_tz(self) -> str | None:
        """What `oomlab ingest --tz` needs: the zone of the naive times (nvidia-smi never prints one)."""
        return None if self.tz == "UTC" else self.tz

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)
