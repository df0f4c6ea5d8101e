"""The one HTTP client (ingest/http_get.py) against a real HTTP server on a loopback port (the standard library's,
started and stopped by each test): what it sends for each kind of credentials, retries on 5xx and not on 4xx,
the server's own error text in one line, and answers it refuses to read whole."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from oomlab.errors import OomlabError
from oomlab.ingest import http_get
from oomlab.ingest.http_get import Client, Credentials, FetchError
from oomlab.parse import bounded


@contextmanager
def serving(answers: list[tuple[int, bytes]]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A server answering each GET with the next (status, body) of `answers` (the last one repeats); yields its
    URL and the headers of every request it got."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the standard library calls it by this name
            seen.append(dict(self.headers))
            status, body = answers[min(len(seen), len(answers)) - 1]
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


OK = (200, json.dumps({"status": "success", "data": []}).encode())


def test_bearer_token_from_a_file_and_basic_auth_from_a_variable(tmp_path: Path, monkeypatch) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    monkeypatch.setenv("OOMLAB_TEST_PASSWORD", "pa:ss")
    with serving([OK]) as (url, seen):
        Client(url, Credentials(token_file=str(token))).get_json("/api/v1/series", {"match[]": "up"})
        Client(url, Credentials(user="ops", password_env="OOMLAB_TEST_PASSWORD")).get_json("/x", {})
        Client(url).get_json("/x", {})
    assert seen[0]["Authorization"] == "Bearer s3cret-token"
    assert seen[1]["Authorization"] == "Basic b3BzOnBhOnNz"  # base64 of ops:pa:ss
    assert "Authorization" not in seen[2]


def _sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The client's back-off waits, recorded and not slept. `http_get.time` is the process's one `time` module,
    so only this thread's calls are taken: another thread of the worker (a server left by an earlier test) that
    sleeps in a loop keeps sleeping for real, instead of spinning and filling the list (pytest-xdist runs
    modules in other orders than one process does)."""
    waits: list[float] = []
    real, here = http_get.time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:
        if threading.get_ident() == here:
            waits.append(seconds)
        else:
            real(seconds)

    monkeypatch.setattr(http_get.time, "sleep", sleep)
    return waits


def test_5xx_is_retried_with_backoff_then_answers(monkeypatch) -> None:
    waits = _sleeps(monkeypatch)
    with serving([(503, b"busy"), (502, b"bad gateway"), OK]) as (url, seen):
        answer = Client(url).get_json("/x", {})
    assert answer["status"] == "success" and len(seen) == 3 and waits == [0.5, 1.0]


def test_4xx_is_not_retried_and_says_the_servers_reason(monkeypatch) -> None:
    _sleeps(monkeypatch)
    refusal = json.dumps({"status": "error", "errorType": "bad_data", "error": 'parse error at char 4: unexpected "}"'})
    with serving([(400, refusal.encode())]) as (url, seen), pytest.raises(FetchError) as caught:
        Client(url).get_json("/api/v1/query", {"query": "up}"})
    assert len(seen) == 1 and caught.value.status == 400
    assert str(caught.value) == 'HTTP 400: parse error at char 4: unexpected "}"'


def test_no_server_is_one_line_after_the_retries(monkeypatch) -> None:
    _sleeps(monkeypatch)
    with serving([OK]) as (url, _):
        pass  # stopped: nothing listens there now
    with pytest.raises(FetchError) as caught:
        Client(url, attempts=2).get_json("/x", {})
    assert caught.value.status is None and str(caught.value).startswith(f"cannot reach {url}: ")


def test_an_answer_over_the_bound_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(bounded, "WHOLE_DOCUMENT_BYTES", 1000)
    with serving([(200, b"[" + b"1," * 1000 + b"1]")]) as (url, _), pytest.raises(FetchError, match="answer over"):
        Client(url).get_json("/x", {})


def test_a_secret_that_cannot_be_read_names_where_it_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(OomlabError, match="OOMLAB_NO_SUCH_VARIABLE is not set"):
        Credentials(token_env="OOMLAB_NO_SUCH_VARIABLE").header()
    with pytest.raises(OomlabError, match="cannot read the secret"):
        Credentials(token_file=str(tmp_path / "missing")).header()
