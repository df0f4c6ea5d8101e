"""The shapes a widened scenario fleet may take besides the classic ones (issue 35, item 8): each drawn at
random per fleet from its own seeded stream, so that `--classic` (no shapes) gives the classic fleets byte for
byte.

- `kubernetes`: hosts are nodes; every process lifetime is a pod with a new name (`chat-infer-7c9f8d6b45-xk2p9`:
  deployment, pod-template hash of the version, a 5-character suffix); request logs name the pod and the node
  (`pod` + `node`, a nested `kubernetes` object with `pod_name` and `node_name`, the same keys flattened as
  `kubernetes.pod_name`, or `pod_name` + `hostname` stamped by a node's log shipper), some with `gpu_uuid`;
  text logs are one file per pod, named after it, whose first line names the node.
- `units`: memory fields in MiB or GiB, the unit in the field's name (`gpu_mem_allocated_mib`,
  `reserved_gib`, `device_total_mib`), values numbers rounded to a few decimals.
- `echo`: some hosts with a request log also write a text log, so each of their OOMs is in both: the request
  row (with its error) and the traceback, stamped a few ms later, with the message's rounded numbers.
- `pid_namespace`: the service runs in a PID namespace, so PyTorch does not recognise itself in NVML's process
  list: its own memory is printed as `Process <host pid> has M memory in use` (M = reserved + the CUDA
  context, 300-900 MiB) with no `Including non-PyTorch memory, this process has` clause; its text log prints
  the pid it has inside the container.
- `no_before`: request logs state allocated_after (and reserved_after) and peak_allocated, no `_before`.
- `overlap`: decoys whose windows overlap a nightly neighbour job's runs: a weekly one over one of its runs,
  an hourly one over all of them.
- `cards`: L40S, H100 80GB and MI300X besides the classic cards (models.WIDE_CARDS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

SHAPES = ("kubernetes", "units", "echo", "pid_namespace", "no_before", "overlap", "cards")
# How often a fleet draws each shape when none is forced (pid_namespace: nearly always under Kubernetes).
CHANCE = {"kubernetes": 0.5, "units": 0.5, "echo": 0.5, "no_before": 0.4, "overlap": 0.6, "cards": 1.0}
PIDNS_CHANCE = {True: 0.85, False: 0.4}  # with / without Kubernetes (a pod without hostPID, or docker run)
MEMORY_FIELDS = (
    "allocated_before",
    "allocated_after",
    "reserved_before",
    "reserved_after",
    "peak_allocated",
    "device_total",
    "requested_size",
    "available_memory",
    "allocator_allocated",
    "reserved_memory",
)
# Field names with the unit (`{u}`) in them, as services that log MiB or GiB write them.
UNIT_SCHEMES: dict[str, dict[str, str]] = {
    "suffix": {name: f"{name}_{{u}}" for name in MEMORY_FIELDS},
    "gpu_mem": {
        "allocated_before": "gpu_mem_allocated_before_{u}",
        "allocated_after": "gpu_mem_allocated_{u}",
        "reserved_before": "gpu_mem_reserved_before_{u}",
        "reserved_after": "gpu_mem_reserved_{u}",
        "peak_allocated": "gpu_mem_peak_{u}",
        "device_total": "device_total_{u}",
        "requested_size": "oom_requested_{u}",
        "available_memory": "oom_free_{u}",
        "allocator_allocated": "oom_allocated_{u}",
        "reserved_memory": "oom_reserved_{u}",
    },
    "short": {
        "allocated_before": "allocated_before_{u}",
        "allocated_after": "allocated_{u}",
        "reserved_before": "reserved_before_{u}",
        "reserved_after": "reserved_{u}",
        "peak_allocated": "peak_allocated_{u}",
        "device_total": "device_total_{u}",
        "requested_size": "requested_{u}",
        "available_memory": "free_{u}",
        "allocator_allocated": "allocated_at_oom_{u}",
        "reserved_memory": "reserved_at_oom_{u}",
    },
}
UNIT_BYTES = {"mib": 1 << 20, "gib": 1 << 30}
DECIMALS = {"mib": (0, 1, 2), "gib": (2, 3)}
# How a request log names the pod and the node.
KUBE_STYLES = ("pod_node", "nested", "dotted", "hostname")
K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.SafeEncodeString
NAMESPACES = ("serving", "inference", "llm-prod", "ml-serving", "default")
CONTAINER_PIDS = (1, 7, 8, 13, 27)  # the service's pid inside its container: tini or a shell before it
OVERLAP_KINDS = ("weekly", "hourly")


@dataclass(frozen=True)
class Kube:
    """How a Kubernetes fleet names things."""

    style: str  # one of KUBE_STYLES
    namespace: str
    deployment: str  # `{family}` is the model family: `chat-infer`
    gpu_uuid: bool  # request logs carry the GPU's UUID


@dataclass(frozen=True)
class Units:
    """Memory fields in `unit` with `decimals` decimals, named by `scheme`."""

    unit: str
    decimals: int
    scheme: str

    def name(self, canonical: str) -> str:
        return UNIT_SCHEMES[self.scheme][canonical].format(u=self.unit)

    @property
    def divisor(self) -> int:
        return UNIT_BYTES[self.unit]


@dataclass(frozen=True)
class Shapes:
    """The shapes one fleet drew; None for a shape it did not draw."""

    forced: tuple[str, ...] | None  # the shapes `--shapes` asked for; None: each drawn at random
    kube: Kube | None = None
    units: Units | None = None
    echo: bool = False  # which hosts echo is decided after the simulation (build.py)
    echo_delay_ms: tuple[int, int] = (1, 1)  # the traceback's stamp is this many ms after the request's
    pid_namespace: bool = False
    container_pid: int = 0
    no_before: bool = False
    overlap: tuple[str, ...] = ()  # "weekly", "hourly"
    cards: bool = False
    echo_hosts: tuple[str, ...] = field(default_factory=tuple)

    def on(self) -> list[str]:
        """The names of the shapes this fleet has."""
        flags = {
            "kubernetes": self.kube is not None,
            "units": self.units is not None,
            "echo": self.echo,
            "pid_namespace": self.pid_namespace,
            "no_before": self.no_before,
            "overlap": bool(self.overlap),
            "cards": self.cards,
        }
        return [name for name in SHAPES if flags[name]]


def parse_shapes(text: str | None) -> tuple[str, ...] | None:
    """`--shapes a,b` as a tuple of known names (None: drawn at random); raises ValueError on an unknown one."""
    if text is None:
        return None
    names = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise ValueError(f"unknown shape {unknown[0]!r}: pick from {', '.join(SHAPES)}")
    return names


def draw_shapes(seed: int, forced: tuple[str, ...] | None = None) -> Shapes:
    """The shapes of `seed`'s fleet: each at random (CHANCE), or exactly those `forced` names."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2027]))
    rolls = {name: float(rng.random()) for name in SHAPES}  # drawn whatever is forced: the parameters stay put

    def wanted(name: str, chance: float) -> bool:
        return name in forced if forced is not None else rolls[name] < chance

    kube = Kube(
        style=str(rng.choice(KUBE_STYLES)),
        namespace=str(rng.choice(NAMESPACES)),
        deployment=str(rng.choice(["{family}-infer", "infer-{family}", "{family}-server", "{family}"])),
        gpu_uuid=bool(rng.random() < 0.5),
    )
    unit = str(rng.choice(["mib", "gib"]))
    units = Units(unit, int(rng.choice(DECIMALS[unit])), str(rng.choice(list(UNIT_SCHEMES))))
    delay = (int(rng.integers(1, 4)), int(rng.integers(4, 41)))
    container_pid = int(rng.choice(CONTAINER_PIDS))
    overlap = [k for k in OVERLAP_KINDS if rng.random() < 0.7] or [str(rng.choice(OVERLAP_KINDS))]
    is_kube = wanted("kubernetes", CHANCE["kubernetes"])
    return Shapes(
        forced=forced,
        kube=kube if is_kube else None,
        units=units if wanted("units", CHANCE["units"]) else None,
        echo=wanted("echo", CHANCE["echo"]),
        echo_delay_ms=delay,
        pid_namespace=wanted("pid_namespace", PIDNS_CHANCE[is_kube]),
        container_pid=container_pid,
        no_before=wanted("no_before", CHANCE["no_before"]),
        overlap=tuple(overlap) if wanted("overlap", CHANCE["overlap"]) else (),
        cards=wanted("cards", CHANCE["cards"]),
    )


def k8s_name(rng: np.random.Generator, length: int) -> str:
    """`length` characters of Kubernetes' safe alphabet (no vowels, no 0/1/3)."""
    return "".join(K8S_ALPHABET[int(i)] for i in rng.integers(0, len(K8S_ALPHABET), length))


def gpu_uuid(rng: np.random.Generator) -> str:
    """`GPU-8-4-4-4-12` hex digits, as NVML names a GPU."""
    digits = "".join(f"{int(x):x}" for x in rng.integers(0, 16, 32))
    return f"GPU-{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def describe(shapes: Shapes) -> dict[str, Any]:
    """truths.json's `generator.shapes`: what was drawn, with the parameters scoring and debugging need."""
    kube, units = shapes.kube, shapes.units
    return {
        "drawn": shapes.on(),
        "forced": list(shapes.forced) if shapes.forced is not None else None,
        "kubernetes": None
        if kube is None
        else {
            "style": kube.style,
            "namespace": kube.namespace,
            "deployment": kube.deployment,
            "gpu_uuid": kube.gpu_uuid,
            "device": "the node (one GPU per node); every process lifetime is a pod with a new name",
        },
        "units": None
        if units is None
        else {
            "unit": units.unit,
            "decimals": units.decimals,
            "scheme": units.scheme,
            "fields": {c: units.name(c) for c in MEMORY_FIELDS},
        },
        "echo": None if not shapes.echo else {"hosts": list(shapes.echo_hosts), "delay_ms": list(shapes.echo_delay_ms)},
        "pid_namespace": None if not shapes.pid_namespace else {"container_pid": shapes.container_pid},
        "no_before": ["allocated_before", "reserved_before"] if shapes.no_before else None,
        "overlap": list(shapes.overlap) or None,
        "cards": shapes.cards,
    }
