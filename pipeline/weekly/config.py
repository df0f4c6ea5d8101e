"""The weekly job's TOML config, read and checked: a bad key is a one-line error naming the file and the key."""

from __future__ import annotations

import glob
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import OomlabError
from ..fields import Mapped, mapping_from_table
from ..units import parse_duration

TOP_KEYS = {
    "database",
    "output",
    "incidents",
    "alert_confidence",
    "timezone",
    "keep_weeks",
    "prune_before_days",
    "inputs",
    "prometheus",
}
PROMETHEUS_KEYS = {
    "url",
    "match",
    "step",
    "instance",
    "token_env",
    "token_file",
    "user",
    "password_env",
    "password_file",
    "ca_file",
    "timeout",
}
_SECRET_KEYS = ("token_env", "token_file", "user", "password_env", "password_file")
INPUT_KEYS = {"paths", "path", "instance", "model_version", "tags", "tz", "map", "mapping", "columns"}


@dataclass(frozen=True)
class InputGroup:
    """Paths or globs ingested with one set of labels (what one `oomlab ingest` call takes)."""

    paths: tuple[str, ...]
    instance: str | None = None
    model_version: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    tz: str | None = None
    fields_map: dict[str, Mapped] = field(default_factory=dict)
    mapping: str | None = None
    columns: tuple[str, ...] = ()

    def files(self) -> list[str]:
        """The paths, each glob expanded (sorted; one matching nothing adds nothing)."""
        found: list[str] = []
        for pattern in self.paths:
            found += sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        return found


@dataclass(frozen=True)
class PrometheusSource:
    """A Prometheus server the job pulls its week from (`oomlab pull prometheus`'s options)."""

    url: str
    matchers: tuple[str, ...] = ()
    step: str = "30s"
    instance: str | None = None
    credentials: dict[str, str | None] = field(default_factory=dict)  # where the secrets are read, never them
    ca_file: str | None = None
    timeout_s: float = 30.0


@dataclass(frozen=True)
class WeeklyConfig:
    """Every key of the config file, relative paths made absolute against the file's folder."""

    path: Path
    database: Path
    output: Path
    inputs: tuple[InputGroup, ...]
    prometheus: tuple[PrometheusSource, ...] = ()
    incidents: int = 3
    alert_confidence: float = 0.7
    timezone: str = "UTC"
    keep_weeks: int | None = None
    prune_before_days: int | None = None


class ConfigError(OomlabError):
    """A config file that cannot be used: names the file and the key."""

    def __init__(self, path: Path, key: str | None, reason: str) -> None:
        where = f"{path}: {key}" if key else str(path)
        super().__init__(f"{where}: {reason}")


def load_config(path: str | Path) -> WeeklyConfig:
    """Read and check the config file at `path`."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise ConfigError(path, unknown[0], f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    base = path.parent

    def where(value: str, key: str) -> Path:
        expanded = Path(_expanded(path, key, value))
        return expanded if expanded.is_absolute() else base / expanded

    for key in ("database", "output"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ConfigError(path, key, "required: a path (relative to the config file's folder)")
    timezone = _string(path, "timezone", data.get("timezone", "UTC"))
    _check_tz(path, "timezone", timezone)
    inputs = data.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
        raise ConfigError(path, "inputs", "must be an array of tables ([[inputs]])")
    servers = data.get("prometheus", [])
    if not isinstance(servers, list) or not all(isinstance(i, dict) for i in servers):
        raise ConfigError(path, "prometheus", "must be an array of tables ([[prometheus]])")
    return WeeklyConfig(
        path=path,
        database=where(data["database"], "database"),
        output=where(data["output"], "output"),
        inputs=tuple(_input(path, f"inputs[{n}]", entry, where) for n, entry in enumerate(inputs)),
        prometheus=tuple(_prometheus(path, f"prometheus[{n}]", entry, where) for n, entry in enumerate(servers)),
        incidents=_int(path, "incidents", data.get("incidents", 3), minimum=0),
        alert_confidence=_confidence(path, data.get("alert_confidence", 0.7)),
        timezone=timezone,
        keep_weeks=_optional_int(path, "keep_weeks", data.get("keep_weeks"), minimum=1),
        prune_before_days=_optional_int(path, "prune_before_days", data.get("prune_before_days"), minimum=1),
    )


def _input(path: Path, key: str, entry: dict[str, Any], where: Any) -> InputGroup:
    unknown = sorted(set(entry) - INPUT_KEYS)
    if unknown:
        raise ConfigError(path, f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(INPUT_KEYS))})")
    raw = entry.get("paths", entry.get("path"))
    raw = [raw] if isinstance(raw, str) else raw
    if not raw or not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        raise ConfigError(path, f"{key}.paths", "required: a path or glob, or a list of them")
    paths = tuple(str(where(p, f"{key}.paths")) for p in raw)
    for pattern in paths:
        if not glob.has_magic(pattern) and not Path(pattern).exists():
            raise ConfigError(path, f"{key}.paths", f"{pattern} does not exist")
    tags = entry.get("tags", {})
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise ConfigError(path, f"{key}.tags", 'must be a table of strings, e.g. tags = {team = "search"}')
    fields_map = entry.get("map", {})
    if not isinstance(fields_map, dict):
        raise ConfigError(path, f"{key}.map", 'must be a table canonical = "theirs", e.g. map = {ts = "time"}')
    try:  # entries as in a --mapping file: a name, or { field = "theirs", unit = "MiB" } for a byte field
        fields_map = mapping_from_table(fields_map, f"{key}.map")
    except OomlabError as exc:
        raise ConfigError(path, None, exc.message) from None
    tz = entry.get("tz")
    if tz is not None:
        _check_tz(path, f"{key}.tz", _string(path, f"{key}.tz", tz))
    mapping = entry.get("mapping")
    if mapping is not None:
        mapping = str(where(_string(path, f"{key}.mapping", mapping), f"{key}.mapping"))
        if not Path(mapping).is_file():
            raise ConfigError(path, f"{key}.mapping", f"{mapping} is not a file")
    columns = entry.get("columns", [])
    columns = columns.split(",") if isinstance(columns, str) else columns
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ConfigError(path, f"{key}.columns", "must be a list of field names (or one comma-separated string)")
    return InputGroup(
        paths=paths,
        instance=_optional_string(path, f"{key}.instance", entry.get("instance")),
        model_version=_optional_string(path, f"{key}.model_version", entry.get("model_version")),
        tags=dict(tags),
        tz=tz,
        fields_map=dict(fields_map),
        mapping=mapping,
        columns=tuple(c.strip() for c in columns if c.strip()),
    )


def _prometheus(path: Path, key: str, entry: dict[str, Any], where: Any) -> PrometheusSource:
    unknown = sorted(set(entry) - PROMETHEUS_KEYS)
    if unknown:
        raise ConfigError(path, f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(PROMETHEUS_KEYS))})")
    url = _string(path, f"{key}.url", entry.get("url"))
    if not url.startswith(("http://", "https://")):
        raise ConfigError(path, f"{key}.url", f"must be an http:// or https:// URL, not {url!r}")
    matchers = entry.get("match", [])
    matchers = [matchers] if isinstance(matchers, str) else matchers
    if not isinstance(matchers, list) or not all(isinstance(m, str) and m for m in matchers):
        raise ConfigError(path, f"{key}.match", 'must be a selector or a list of them, e.g. ["{namespace=\\"llm\\"}"]')
    secrets = {name: _optional_string(path, f"{key}.{name}", entry.get(name)) for name in _SECRET_KEYS}
    for name in ("token_file", "password_file"):
        if secrets[name] is not None:
            secrets[name] = str(where(secrets[name], f"{key}.{name}"))
    ca_file = _optional_string(path, f"{key}.ca_file", entry.get("ca_file"))
    timeout = entry.get("timeout", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(path, f"{key}.timeout", f"must be a number of seconds > 0, not {timeout!r}")
    return PrometheusSource(
        url=url,
        matchers=tuple(matchers),
        step=_step(path, f"{key}.step", entry.get("step", "30s")),
        instance=_optional_string(path, f"{key}.instance", entry.get("instance")),
        credentials=secrets,
        ca_file=None if ca_file is None else str(where(ca_file, f"{key}.ca_file")),
        timeout_s=float(timeout),
    )


def _step(path: Path, key: str, value: object) -> str:
    step = _string(path, key, value)
    if parse_duration(step) is None:
        raise ConfigError(path, key, f'must be a duration such as "30s" or "1m", not {step!r}')
    return step


_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _expanded(path: Path, key: str, value: str) -> str:
    """A path as a shell would read it: `~` is the home folder, `${VAR}` and `$VAR` the variable's value; a
    variable that is not set is an error naming it (an empty one would silently point somewhere else)."""

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in os.environ:
            raise ConfigError(path, key, f"${{{name}}} is not set (in {value!r})")
        return os.environ[name]

    return os.path.expanduser(_VARIABLE.sub(value_of, value))


def _string(path: Path, key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(path, key, f"must be a non-empty string, not {value!r}")
    return value


def _optional_string(path: Path, key: str, value: object) -> str | None:
    return None if value is None else _string(path, key, value)


def _int(path: Path, key: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(path, key, f"must be a whole number >= {minimum}, not {value!r}")
    return value


def _optional_int(path: Path, key: str, value: object, *, minimum: int) -> int | None:
    return None if value is None else _int(path, key, value, minimum=minimum)


def _confidence(path: Path, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(path, "alert_confidence", f"must be a number from 0 to 1, not {value!r}")
    return float(value)


def _check_tz(path: Path, key: str, tz: str) -> None:
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(path, key, f"unknown time zone {tz!r}") from None
