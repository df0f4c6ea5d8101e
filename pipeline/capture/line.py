"""One request as one JSON line in the canonical field names (`oomlab.fields`), built without a dict per call."""

from __future__ import annotations

import json
import math
import operator
import time
from collections.abc import Iterable, Mapping

_encode = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str).encode

# Keys every line has, in order; the numeric ones follow from the caller. gpu_index and model_version are
# written even when unknown (null): with latency_ms they let `oomlab ingest` recognise a request log by its
# first line, which needs two request-specific fields.
HEAD_FIELDS = ("ts", "instance", "gpu_index", "model_version", "request_id", "status", "latency_ms")
ERROR_LIMIT = 2000  # characters of a non-OOM error kept; OOM messages are kept whole


def json_value(value: object) -> str:
    """A JSON value for anything a caller passes: integers stay integers (numpy's and torch's too)."""
    if type(value) is int:
        return str(value)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "null"  # NaN and infinities are not JSON
    if not isinstance(value, (bool, float, str)):
        try:
            return str(operator.index(value))
        except TypeError:
            pass
    return _encode(value)


class _SecondCache:
    """The `YYYY-MM-DDTHH:MM:SS` of the last second seen: formatting it once per second, not per request."""

    def __init__(self) -> None:
        self.state = (-1, "")  # one tuple, replaced whole, so threads never see half an update

    def prefix(self, seconds: int) -> str:
        cached, text = self.state
        if cached != seconds:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
            self.state = (seconds, text)
        return text


_seconds = _SecondCache()


def iso_utc(ns: int) -> str:
    """ISO 8601 UTC with microseconds, e.g. `2026-11-30T01:50:03.302123Z`, from epoch nanoseconds."""
    seconds, micros = divmod(ns // 1000, 1_000_000)
    return f"{_seconds.prefix(seconds)}.{micros:06d}Z"


class LineEncoder:
    """Encodes request lines of one instance, GPU and model version (their JSON is built once). `alloc_conf`, the
    process's PYTORCH_CUDA_ALLOC_CONF, ends every line when set: one line of a file is all ingest needs, but any
    file may be the one rotation kept, and built once it costs only its bytes."""

    def __init__(
        self, instance: str, gpu_index: int | None, model_version: str | None, alloc_conf: str | None = None
    ) -> None:
        self._labels = (
            f'"instance":{json_value(instance)},"gpu_index":{json_value(gpu_index)},'
            f'"model_version":{json_value(model_version)},'
        )
        self._settings = f',"alloc_conf":{_encode(alloc_conf)}' if alloc_conf else ""

    def encode(
        self,
        ts_ns: int,
        request_id: object,
        status: str,
        latency_ns: int,
        numbers: Iterable[tuple[str, object]],
        error: str | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> str:
        """The line, newline included; `numbers` with a None value are left out."""
        line = (
            f'{{"ts":"{iso_utc(ts_ns)}",{self._labels}"request_id":{json_value(request_id)},'
            f'"status":{json_value(status)},"latency_ms":{latency_ns / 1e6:.3f}'
        )
        for name, value in numbers:
            if value is not None:
                line += f',"{name}":{json_value(value)}'
        if error is not None:
            line += f',"error":{_encode(error)}'
        if extra:
            for name, value in extra.items():
                line += f",{_encode(str(name))}:{json_value(value)}"
            if "alloc_conf" in extra:  # the caller's own, which a JSON object cannot hold twice
                return line + "}\n"
        return line + self._settings + "}\n"
