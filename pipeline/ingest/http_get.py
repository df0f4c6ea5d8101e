"""GET a JSON document from a server that may be slow, restarting or behind auth: bounded timeouts, retries with
backoff on what may pass (5xx, a refused or dropped connection, a timeout), and one clear line for what will not
(401/403, 4xx). Credentials come from an environment variable or a file, never from the command line (where
`ps` and shell history would show them)."""

from __future__ import annotations

import base64
import functools
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import OomlabError
from ..parse import bounded


class FetchError(OomlabError):
    """A request that failed for good (after the retries): `status` is the HTTP status, None when no answer came."""

    def __init__(self, message: str, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Credentials:
    """Where the secret is read from: a bearer token, or a user and password (basic auth)."""

    token_env: str | None = None
    token_file: str | None = None
    user: str | None = None
    password_env: str | None = None
    password_file: str | None = None

    def header(self) -> str | None:
        """The Authorization header's value, or None without credentials; an unset variable or unreadable file
        is an error naming it."""
        token = _secret(self.token_env, self.token_file)
        if token is not None:
            return f"Bearer {token}"
        if self.user is None:
            return None
        password = _secret(self.password_env, self.password_file) or ""
        return "Basic " + base64.b64encode(f"{self.user}:{password}".encode()).decode()


def _secret(env: str | None, file: str | None) -> str | None:
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise OomlabError(f"environment variable {env} is not set (it should hold the secret)")
        return value.strip()
    if file is not None:
        try:
            return Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise OomlabError(f"{file}: cannot read the secret: {exc.strerror or exc}") from exc
    return None


@dataclass(frozen=True)
class Client:
    """GETs against one base URL."""

    base_url: str
    credentials: Credentials = Credentials()
    ca_file: str | None = None
    timeout_s: float = 30.0
    attempts: int = 4  # the first try and three retries
    backoff_s: float = 0.5  # doubled after each failed try: 0.5, 1, 2 s

    def get_json(self, path: str, params: dict[str, Any]) -> Any:
        """The decoded answer of GET base_url/path?params; FetchError when it cannot be had."""
        url = self.base_url.rstrip("/") + path + "?" + urllib.parse.urlencode(params, doseq=True)
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        auth = self.credentials.header()
        if auth is not None:
            request.add_header("Authorization", auth)
        delay = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                return self._once(request)
            except FetchError as exc:
                if not _may_pass(exc) or attempt == self.attempts:
                    raise
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _once(self, request: urllib.request.Request) -> Any:
        context = _tls_context(self.ca_file) if self.ca_file else None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=context) as answer:
                body = bounded.read_bounded(answer)  # decoded whole: the pull sizes its queries far below it
        except urllib.error.HTTPError as exc:
            text = exc.read(4096).decode("utf-8", errors="replace")
            raise FetchError(_http_reason(exc.code, text), exc.code, text) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise FetchError(f"cannot reach {self.base_url}: {reason}") from None
        if body is None:
            raise FetchError(f"answer over {bounded.bound_text()}", 200)
        try:
            return json.loads(body)
        except ValueError as exc:
            raise FetchError(f"the answer is not JSON: {exc}", 200) from None


@functools.cache
def _tls_context(ca_file: str) -> ssl.SSLContext:
    """One context per CA file, not one per request: building it reads and parses the file (a pull makes
    hundreds of requests)."""
    return ssl.create_default_context(cafile=ca_file)


def _may_pass(exc: FetchError) -> bool:
    """Whether trying again may succeed: no answer at all (refused, dropped, timed out), or a 5xx."""
    return exc.status is None or exc.status >= 500


def _http_reason(status: int, body: str) -> str:
    """One line for an HTTP error: the server's own error text where it gives one (Prometheus: `error`)."""
    try:
        said = json.loads(body).get("error")
    except (ValueError, AttributeError):
        said = None
    if status in (401, 403):
        return f"HTTP {status}: the server refused the credentials (set --token-env / --token-file, or --user)"
    return f"HTTP {status}: {said or body.strip()[:200] or 'no reason given'}"
