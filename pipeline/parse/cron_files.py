"""Calendars as fleets write them: crontabs (a user's, `/etc/crontab`, `/etc/cron.d/*`) and Kubernetes CronJob
manifests. Each schedule becomes a `JobRule` (parse/calendar.py), each entry that cannot be one a reject naming
its line and why.

Neither format says how long a run lasts, which a job's windows need. Where the file bounds it, that bound is the
run's length: a `timeout DURATION` wrapper in a cron command, a Job's `activeDeadlineSeconds` (Kubernetes ends
the run then). Elsewhere `--job-duration` gives it; without one the entry is a reject that says so.

A crontab's schedule is in the cron daemon's time zone: `CRON_TZ=<zone>` (cronie) where the file sets one, else
--tz, else UTC. A CronJob's is in `spec.timeZone`, else the `CRON_TZ=`/`TZ=` prefix of its schedule, else the
controller's, taken as --tz or UTC. A zone other than UTC is kept as the rule's `CRON_TZ=<zone> ` prefix and
applied when the rule is expanded (calendar.expand), day by day, so runs follow daylight saving time.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from cronsim import CronSim, CronSimError

from ..errors import InputError
from ..records import Reject
from .calendar import JobRule, calendar_text, check_selector

# cron's @-macros (man 5 crontab); @reboot has no time of day and is a reject
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# One field of a cron schedule: numbers, names (mon, jan), `*`, `?`, lists, ranges, steps, `L`, `W`, `#`.
_FIELD = r"[0-9A-Za-z*?/,#-]+"
_ENTRY = re.compile(rf"^\s*(?:(@[a-z]+)|({_FIELD}(?:\s+{_FIELD}){{4}}))\s+(\S.*)$")
_ENV = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# A system crontab's sixth field is a user name; a user crontab's is the command, which may look like one (`cd`,
# `find`). A word is read as a user only where every entry's is user-like and none is a command cron files run.
_USER = re.compile(r"^[a-z_][a-z0-9_-]*\$?$")
_COMMANDS = _word_set(
    "cd find python python3 bash sh php perl ruby node flock nice ionice timeout test echo curl wget rm cp mv "
    "rsync tar docker kubectl sudo su env sleep touch mkdir date git make shutdown reboot logrotate certbot "
    "systemctl service apt apt-get yum dnf run-parts nohup exec chronic source true"
)


def looks_like_crontab(text: str) -> bool:
    """A crontab: every line that is neither blank, a comment nor an environment setting is a cron entry, and
    there is at least one."""
    entries = 0
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#") or _ENV.match(line):
            continue
        if not _is_entry(line):
            if number < len(lines):  # the head's last line may be cut short
                return False
            continue
        entries += 1
    return entries > 0


def _is_entry(line: str) -> bool:
    """A line of five valid cron fields (or an @macro) and a command: words alone (`nothing to see here at
    all`) are no schedule."""
    match = _ENTRY.match(line)
    if match is None:
        return False
    if match.group(1):
        return match.group(1) in MACROS or match.group(1) == "@reboot"
    try:
        CronSim(" ".join(match.group(2).split()), datetime(2000, 1, 1))
    except CronSimError:
        return False
    return True


def looks_like_cronjob(text: str) -> bool:
    """A Kubernetes manifest that holds a CronJob (YAML or JSON; any apiVersion of batch)."""
    return bool(_CRONJOB_KIND.search(text)) and "batch/" in text


_CRONJOB_KIND = re.compile(r"""^\s*["']?kind["']?\s*:\s*["']?CronJob["']?\s*,?\s*$""", re.MULTILINE)


def read_crontab(
    path: str | Path, tz: str | None, duration: float | None, host: str | None
) -> Iterator[JobRule | Reject]:
    """Every entry of a crontab as a JobRule or a Reject. `host` (--instance) is the one host a crontab runs on;
    without it the jobs run on every host the data names."""
    lines = calendar_text(path).splitlines()
    system = _is_system_crontab(lines)
    zone = tz
    hosts = host_selectors(path, host)
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        env = _ENV.match(line)
        if env:
            if env.group(1) == "CRON_TZ":
                zone = env.group(2).strip().strip("\"'") or tz
            continue
        try:
            yield _cron_entry(number, line, system, zone, duration, hosts)
        except (ValueError, CronSimError) as exc:
            yield Reject(number, str(exc), line[:2000])


def _cron_entry(
    number: int, line: str, system: bool, zone: str | None, duration: float | None, hosts: tuple[str, ...] | None
) -> JobRule:
    match = _ENTRY.match(line)
    if not match:
        raise ValueError("not a cron entry: five schedule fields (or an @macro) and a command")
    macro, fields, command = match.groups()
    if macro == "@reboot":
        raise ValueError("@reboot runs once at boot, on no calendar")
    if macro and macro not in MACROS:
        raise ValueError(f"unknown cron macro {macro}")
    schedule = MACROS[macro] if macro else " ".join(fields.split())
    if system:
        command = command.split(None, 1)[1] if len(command.split(None, 1)) == 2 else ""
    command = _before_percent(command)
    minutes = _timeout_minutes(command) or duration
    if minutes is None:
        raise ValueError(
            "a cron entry states no duration: give how long a run lasts with --job-duration MINUTES "
            "(or wrap the command in `timeout DURATION`)"
        )
    return JobRule(number, job_name(command), with_zone(schedule, zone), float(minutes), hosts)


def _is_system_crontab(lines: list[str]) -> bool:
    """Does every entry name a user before its command (/etc/crontab, /etc/cron.d)?"""
    users = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#") or _ENV.match(line):
            continue
        match = _ENTRY.match(line)
        if match:
            words = match.group(3).split()
            users.append(words[0] if len(words) > 1 else "")
    return bool(users) and all(_USER.match(u) and u not in _COMMANDS for u in users)


def _before_percent(command: str) -> str:
    """The command cron runs: up to the first `%` not escaped by a backslash (the rest is its standard input)."""
    match = re.search(r"(?<!\\)%", command)
    return (command[: match.start()] if match else command).replace("\\%", "%")


# Script files a cron entry runs, by their extension: the script's name is the job's.
_SCRIPT = re.compile(r"\.(?:sh|bash|py|pl|rb|js|php|r|R|lua|ps1)$")
# Words that run the command after them (with options, and `_ARGS` positional arguments of their own).
_WRAPPERS = _word_set(
    "sudo nice ionice nohup env exec time chronic cronic flock timeout run-one setlock stdbuf xvfb-run "
    "systemd-cat caffeinate"
)
_ARGS = {"flock": 1, "timeout": 1, "setlock": 1}
# Interpreters: the script or module they run names the job.
_INTERPRETERS = re.compile(r"^(?:python[0-9.]*|bash|sh|zsh|dash|ksh|perl|ruby|node|nodejs|php|Rscript|lua)$")
# Commands that only prepare the one that follows them (`cd /app && ./run.sh`).
_PREAMBLE = frozenset({"cd", ".", "source", "export", "set", "umask", "ulimit", "true", "sleep", "test", "["})


def job_name(command: str) -> str:
    """A readable name for the job a cron command runs: the script it runs (`/opt/bin/backup.sh daily` ->
    `backup`), the module of `python -m` (`src.utils.auto_train_manager`), else the program, past `cd ... &&`
    and wrappers such as flock, timeout and nice."""
    for segment in re.split(r"&&|\|\||;|\|", command):
        words = [w for w in _words(segment) if not _ENV.match(w) and not re.match(r"^\d*[<>&]", w)]
        if words and _base(words[0]) not in _PREAMBLE:
            return _segment_name(words)
    words = _words(command)
    return _base(words[0]) if words else "cron job"


def _segment_name(words: list[str]) -> str:
    if "--" in words[:-1]:  # `kubectl exec POD -- pg_dump ...`: the command is what follows
        words = words[words.index("--") + 1 :]
    scripts = [w for w in words if not w.startswith("-") and _SCRIPT.search(w)]
    if scripts:
        return _SCRIPT.sub("", _base(scripts[0]))
    index = 0
    while index < len(words):
        word = _base(words[index])
        if word in _CONTAINER_TOOLS and words[index + 1 : index + 2] == ["exec"]:
            # `docker exec [options] CONTAINER COMMAND`: the command in the container names the job
            index = _past_options(words, index + 2) + 1
        elif word in _WRAPPERS:
            index = _past_options(words, index + 1) + _ARGS.get(word, 0)
        elif _INTERPRETERS.match(word):
            rest = words[index + 1 :]
            if "-m" in rest and rest.index("-m") + 1 < len(rest):
                return rest[rest.index("-m") + 1]
            index = _past_options(words, index + 1)
        else:
            return word
    return _base(words[0])


_CONTAINER_TOOLS = frozenset({"docker", "podman", "nerdctl"})
# The wrappers' options that take a value as the next word (nice -n 10, ionice -c 3, timeout -s KILL, flock -w 5,
# sudo -u backup).
_VALUED = frozenset(
    {"-n", "-c", "-s", "-k", "-w", "-E", "-u", "-g", "-e", "--signal", "--kill-after", "--user", "--env", "--workdir"}
)


def _past_options(words: list[str], index: int) -> int:
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in _VALUED else 1
    return index


def _timeout_minutes(command: str) -> float | None:
    """The run's length where `timeout DURATION` bounds it: 90, 90s, 5m, 2h, 1d (coreutils' units)."""
    words = _words(command)
    for index, word in enumerate(words):
        if _base(word) != "timeout":
            continue
        position = _past_options(words, index + 1)
        if position < len(words):
            match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", words[position])
            if match:
                return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)] / 60
    return None


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote: the words as written
        return text.split()


def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def with_zone(schedule: str, zone: str | None) -> str:
    """The schedule as calendar_rules stores it: `CRON_TZ=<zone> ` before it unless the zone is UTC. The
    schedule and the zone are checked now, so that a typo is a reject of its entry, not an error at expansion."""
    CronSim(schedule, datetime(2000, 1, 1))
    if zone is None or zone.upper() in ("UTC", "ETC/UTC", "GMT", "Z"):
        return schedule
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone!r}") from None
    return f"CRON_TZ={zone} {schedule}"


def read_cronjobs(path: str | Path, tz: str | None, duration: float | None) -> Iterator[JobRule | Reject]:
    """Every CronJob of a Kubernetes manifest (one document or many, a `List`) as a JobRule or a Reject; other
    kinds are skipped, and a file with none is a file that yielded nothing."""
    text = calendar_text(path)
    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1 if node is not None else 0
            document = loader.construct_document(node) if node is not None else None
            for item in _items(document):
                if item.get("kind") == "CronJob":
                    try:
                        yield _cronjob(line, item, tz, duration)
                    except (ValueError, CronSimError) as exc:
                        yield Reject(line, f"CronJob {_safe_name(item)!r}: {exc}", _safe_name(item))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = f"not valid YAML: {getattr(exc, 'problem', exc)}"
        if "{{" in text:
            reason += "; a Helm template is read once rendered (`helm template`)"
        yield Reject(mark.line + 1 if mark else 0, reason, "")
    finally:
        loader.dispose()


def _items(document: object) -> list[dict]:
    if not isinstance(document, dict):
        return []
    if document.get("kind") == "List" and isinstance(document.get("items"), list):
        return [item for item in document["items"] if isinstance(item, dict)]
    return [document]


def _name(item: dict) -> str:
    return _text_at(item, "metadata", "name") or ""


def _cronjob(line: int, item: dict, tz: str | None, duration: float | None) -> JobRule:
    name = _name(item)
    if not name:
        raise ValueError("no metadata.name")
    spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
    if spec.get("suspend") is True:
        raise ValueError("suspended (spec.suspend: true): it does not run")
    schedule = (_text_at(spec, "schedule") or "").strip()
    if not schedule:
        raise ValueError("no spec.schedule")
    zone = _text_at(spec, "timeZone")
    prefix = re.match(r"^(?:CRON_TZ|TZ)=(\S+)\s+(.*)$", schedule)
    if prefix:
        zone, schedule = zone or prefix.group(1), prefix.group(2)
    schedule = MACROS.get(schedule, schedule)
    pod = _get(spec, "jobTemplate", "spec", "template", "spec")
    pod = pod if isinstance(pod, dict) else {}
    deadline = _get(spec, "jobTemplate", "spec", "activeDeadlineSeconds") or pod.get("activeDeadlineSeconds")
    if deadline is not None and not isinstance(deadline, int | float | str):
        raise ValueError("activeDeadlineSeconds is no number")
    minutes = float(deadline) / 60 if deadline else duration
    if minutes is None:
        raise ValueError("states no activeDeadlineSeconds: give how long a run lasts with --job-duration MINUTES")
    node = _text_at(pod, "nodeName") or _text_at(pod, "nodeSelector", "kubernetes.io/hostname")
    hosts = (node,) if node else None
    if hosts:
        check_selector(node)
    return JobRule(line, name, with_zone(schedule, zone or tz), minutes, hosts)


def _safe_name(item: dict) -> str:
    try:
        return _name(item)[:200]
    except ValueError:
        return ""


def _text_at(data: object, *keys: str) -> str | None:
    """The text at `keys`, None where there is none; a number as its digits; anything else (a list, a mapping,
    perhaps a YAML alias that expands a million-fold) raises, as it is no name, schedule or zone."""
    value = _get(data, *keys)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{'.'.join(keys)} is not text")


def _get(data: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def host_selectors(path: str | Path, host: str | None) -> tuple[str, ...] | None:
    """The hosts a crontab's or timer's jobs run on: --instance, else every host (None)."""
    if host is None:
        return None
    try:
        check_selector(host)
    except ValueError as exc:
        raise InputError(str(path), f"--instance: {exc}") from None
    return (host,)
