"""The fleet: cards, instances, model versions and their rolling deploys, and the scheduled jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from .grounding import GIB, MIB

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
START = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday: the last week holds the real H200 captures (11-30)
REQUESTS_PER_WEEK = 100_000  # at --scale 1, all instances together: 3 weeks x 33 = 10M requests
DEFAULT_SCALE = 0.6  # the committed set: 180,000 requests, under 8 MB
DEPLOY_STEP_MS = 90 * 60_000  # a rolling deploy moves to the next instance every 90 minutes
DEPLOY_DOWNTIME_MS = 120_000  # no requests while the new process loads
WATCHDOG_FRACTION = 0.50  # restart when allocated after a request exceeds half the device
WATCHDOG_DOWNTIME_MS = 90_000
CACHE_NOTE = (
    "empty_cache() after each request is switched off on this host: reserved climbs while allocated "
    "after requests stays flat at the baseline; not a leak, and it causes no OOM"
)


@dataclass(frozen=True)
class Card:
    """A GPU model: what nvidia-smi and PyTorch report for it."""

    key: str
    smi_name: str
    smi_total_mib: int  # nvidia-smi memory.total
    device_total: int  # torch.cuda.mem_get_info()[1]: the smi total less what the driver keeps
    idle_w: float
    max_w: float

    @property
    def driver_reserved_mib(self) -> int:
        """MiB nvidia-smi counts in neither used nor free (614 MiB on the real H200)."""
        return self.smi_total_mib - self.device_total // MIB


# Totals PyTorch prints for these cards ("21.96 GiB", "79.14 GiB" appear in real messages in tests/cases/oom).
A10 = Card("A10", "NVIDIA A10", 23_028, 22_488 * MIB + 720_896, 29.0, 150.0)
A100 = Card("A100", "NVIDIA A100-SXM4-80GB", 81_920, 81_039 * MIB + 720_896, 62.0, 400.0)


@dataclass(frozen=True)
class Instance:
    """One inference process host (one GPU, index 0)."""

    name: str
    card: Card
    log: str  # "requests": structured request log; "text": service text log only
    weight: float  # share of traffic the load balancer sends it
    fragmentation: bool = False
    cache_growth: bool = False
    prefix_cache: int = 0  # bytes of small KV blocks the service allocates at start (a flat pool, not a leak)


@dataclass(frozen=True)
class Version:
    """A model version and when its rolling deploy started (None: already live at the start)."""

    name: str
    rollout_day: float | None
    rollout: tuple[str, ...] = ()  # instances in deploy order
    leaks: bool = False


@dataclass(frozen=True)
class Job:
    """A scheduled job: a daily window (cron minute and hour) or explicit occurrences."""

    name: str
    hosts: tuple[str, ...]
    duration_min: int
    cron: str | None = None
    occurrences: tuple[tuple[datetime, datetime], ...] = ()
    gpu_mib: int = 0  # memory its GPU process holds while it runs
    process_name: str = ""


INSTANCES: tuple[Instance, ...] = (
    Instance("a10-01", A10, "requests", 1.0),
    Instance("a10-02", A10, "requests", 1.0),
    Instance("a10-03", A10, "requests", 1.0),
    Instance("a10-04", A10, "requests", 1.0),
    Instance("a10-05", A10, "requests", 1.0),
    Instance("a10-06", A10, "text", 1.0),
    Instance("a100-01", A100, "requests", 1.6),
    Instance("a100-02", A100, "requests", 1.6),
    Instance("a100-03", A100, "requests", 1.6),
    Instance("a100-04", A100, "requests", 1.6, cache_growth=True),
    Instance("a100-05", A100, "requests", 1.6, fragmentation=True, prefix_cache=4 * GIB),
    Instance("a100-06", A100, "text", 1.6),
)
# v1.5's rollout was paused after seven instances (on-call saw the watchdog restarts), before it reached
# the batch pool (the backup's hosts) and a100-04; v1.6, the fix, went everywhere.
PAUSED_ROLLOUT = ("a10-03", "a100-02", "a10-04", "a100-03", "a10-05", "a100-05", "a100-06")
FULL_ROLLOUT = (*PAUSED_ROLLOUT, "a10-01", "a100-01", "a10-02", "a10-06", "a100-04")


@dataclass(frozen=True)
class FleetPlan:
    """Everything fixed before any request is drawn."""

    seed: int
    scale: float
    weeks: int
    instances: tuple[Instance, ...] = INSTANCES
    versions: tuple[Version, ...] = field(default_factory=tuple)
    backup: Job | None = None
    decoys: tuple[Job, ...] = ()

    @property
    def start_ms(self) -> int:
        return int(START.timestamp() * 1000)

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.weeks * 7 * DAY_MS

    @property
    def total_requests(self) -> float:
        """Expected requests of the whole fleet."""
        return REQUESTS_PER_WEEK * self.weeks * self.scale

    def expected_requests(self, inst: Instance) -> float:
        """Expected requests of one instance."""
        return self.total_requests * inst.weight / sum(i.weight for i in self.instances)

    def instance(self, name: str) -> Instance:
        """The instance called `name`."""
        return next(i for i in self.instances if i.name == name)

    def deploys(self, inst: Instance) -> list[tuple[int, str]]:
        """(time ms, version) of each deploy on `inst`, the first at the start of the data."""
        out = [(self.start_ms, self.versions[0].name)]
        for version in self.versions[1:]:
            if version.rollout_day is None or inst.name not in version.rollout:
                continue
            step = version.rollout.index(inst.name)
            out.append((self.start_ms + int(version.rollout_day * DAY_MS) + step * DEPLOY_STEP_MS, version.name))
        return out


def make_plan(seed: int, scale: float, weeks: int) -> FleetPlan:
    """The fleet for `weeks` weeks: v1.5 (the leak) rolls out on day ~3, v1.6 (the fix) on day ~14 of 21."""
    days = weeks * 7
    versions = (
        Version("assist-1.8b-v1.4", None),
        Version("assist-1.8b-v1.5", int(days * 0.17) + 10 / 24, PAUSED_ROLLOUT, leaks=True),
        Version("assist-1.8b-v1.6", int(days * 0.67) + 10 / 24, FULL_ROLLOUT),
    )
    return FleetPlan(seed, scale, weeks, versions=versions, backup=_backup(), decoys=_decoys(weeks))


def _backup() -> Job:
    """The planted cause: a nightly backup whose GPU process holds 10.10 GiB while it runs."""
    return Job(
        "nightly-backup",
        ("a10-01", "a10-02", "a10-06", "a100-01"),
        90,
        cron="0 1 * * *",
        gpu_mib=10_342,
        process_name="/opt/backup/bin/vecstore-backup",
    )


def _decoys(weeks: int) -> tuple[Job, ...]:
    """Jobs that run but hold no GPU memory: they must not be reported."""
    everyone = tuple(i.name for i in INSTANCES)
    sweeps = tuple(
        (START + timedelta(days=5 + 7 * w, hours=13), START + timedelta(days=5 + 7 * w, hours=16)) for w in range(weeks)
    )  # Saturdays 13:00-16:00
    scrub = START + timedelta(days=min(9, weeks * 7 - 1), hours=14)
    return (
        Job("log-rotate", everyone, 10, cron="0 0 * * *"),
        Job("metrics-export", everyone, 15, cron="30 */6 * * *"),
        Job("eval-sweep", ("a100-02", "a100-03"), 180, occurrences=sweeps),
        Job("disk-scrub", ("a10-03", "a10-04"), 60, occurrences=((scrub, scrub + timedelta(hours=1)),)),
    )
