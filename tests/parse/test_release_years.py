"""A line without a year (vLLM's `INFO 05-04 14:43:16`) in a log that names the vLLM it runs takes the first year in
which its day is not before that version came out (parse/text/releases.py), where no dated line and no --at place
it (issue 38); `sources.note` still says the year was guessed, and from what.

The logs are real vLLM start-up logs pasted into a runbook and an issue (tests/cases/realworld/pasted_text/015 and
028, their URLs in case.json): 015 states `vLLM API server version 0.4.1` and `Initializing an LLM engine (v0.4.1)`,
028 `Initializing an LLM engine (v0.4.2)`, every line year-less. vLLM set its version to 0.4.1 on 2024-04-19 and to
0.4.2 on 2024-05-04 (https://github.com/vllm-project/vllm/pull/4177, /pull/4600).
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from oomlab.parse.text.logline import LineClock
from oomlab.parse.text.releases import VERSION_LINE, Release, release_in, vllm_release
from oomlab.parse.text.textlog import scan_text_log

from conftest import CASES

REALWORLD = CASES / "realworld"
(V041,) = (REALWORLD / "pasted_text").glob("015_*/artifact.*")  # vLLM 0.4.1, lines of 05-04
(V042,) = (REALWORLD / "pasted_text").glob("028_*/artifact.*")  # vLLM 0.4.2, lines of 05-29
(NO_VERSION,) = (REALWORLD / "pasted_text").glob("029_*/artifact.*")  # a V1 worker's OOM of 07-07, no version
NOW = datetime(2026, 12, 6, 12, 0)  # late enough that the latest past year is not the version's
WEIGHTS_041 = "INFO 05-04 14:43:20 model_runner.py:173] Loading model weights took 14.9595 GB"  # 015, line 14
WEIGHTS_042 = "INFO 05-29 10:26:05 model_runner.py:175] Loading model weights took 0.2389 GB"  # 028, line 7
NOTE_041 = (
    "lines without a year read as 2024: the earliest not before vLLM 0.4.1 (2024-04-19), the version the log"
    " states (pass --at to place them)"
)


def clock_of(text: str, **kwargs: object) -> LineClock:
    """A clock of the present NOW that has read `text` the way the text-log scan reads a window's head."""
    clock = LineClock(now=NOW, **kwargs)  # type: ignore[arg-type]
    clock.learn_year(text)
    return clock


def without_versions(text: str) -> str:
    """`text` less its version lines."""
    return "\n".join(line for line in text.splitlines() if VERSION_LINE.search(line) is None)


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.4.1", "0.4.1"),  # 015, line 6
        ("INFO 05-29 10:26:04 llm_engine.py:100] Initializing an LLM engine (v0.4.2) with config: model=", "0.4.2"),
        ("INFO 10-17 08:31:22 api_server.py:528] vLLM API server version 0.6.3.post1", "0.6.3.post1"),
        ("INFO 10-17 08:31:22 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: ", "0.6.3"),
        ("INFO 05-01 01:02:03 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model=", "0.8.5"),
        ("INFO 02-11 01:02:03 llm_engine.py:232] Initializing a V0 LLM engine (v0.7.3) with config: ", "0.7.3"),
        ("(APIServer pid=1) INFO 08-21 01:02:03 [utils.py:326] vLLM server version 0.11.0, serving model m", "0.11.0"),
        ("INFO 10-17 08:31:22 api_server.py:1] vLLM API server version 0.4.0+cu118", "0.4.0+cu118"),
    ],
)
def test_version_lines_are_read(line: str, version: str) -> None:
    match = VERSION_LINE.search(line)
    assert match is not None and match[1] == version


@pytest.mark.parametrize(
    "line",
    [
        "INFO 05-04 14:43:16 selector.py:1] Using FlashAttention version 2",
        "INFO 05-04 14:43:16 utils.py:608] Found nccl from library libnccl.so.2.18.1",
        "transformers version 4.40.1, torch version 2.3.0",
        "INFO 05-04 14:43:16 x.py:1] the LLM engine (v0.4.1) is not what this line starts",
        "| NVIDIA-SMI 550.163.01             Driver Version: 550.163.01     CUDA Version: 12.4     |",
    ],
)
def test_an_ordinary_line_naming_a_number_is_no_version_line(line: str) -> None:
    assert VERSION_LINE.search(line) is None and release_in(line) is None


def test_the_release_dates() -> None:
    """A listed version its own date; an unlisted patch or post release the latest listed before it in its minor
    version; a dev build or release candidate only what came before it; nothing past the last listed minor."""
    assert vllm_release("0.4.1") == Release("0.4.1", "0.4.1", date(2024, 4, 19))
    assert vllm_release("0.6.3.post1") == Release("0.6.3.post1", "0.6.1.post2", date(2024, 9, 13))
    assert vllm_release("0.5.1rc1") == Release("0.5.1rc1", "0.5.0.post1", date(2024, 6, 13))
    assert vllm_release("0.5.0rc1") is None  # before 0.5.0, and its minor has nothing earlier
    assert vllm_release("0.1.dev1+g1234abc") is None  # a source build without tags: no version at all
    assert vllm_release("0.8.5") is None


@pytest.mark.parametrize(("log", "line", "version"), [(V041, WEIGHTS_041, "0.4.1"), (V042, WEIGHTS_042, "0.4.2")])
def test_a_version_line_gives_the_first_year_after_the_release(log: Path, line: str, version: str) -> None:
    clock = clock_of(log.read_text())
    assert clock.release is not None and clock.release.version == version
    moment = clock(line)
    assert moment is not None and moment.year == 2024
    assert clock.guessed == 2024 and clock.guessed_after == clock.release
    assert clock.guess_reason.startswith(f"the earliest not before vLLM {version} (2024-")


def test_a_day_before_the_release_is_in_the_next_year() -> None:
    """03-01 of the 0.4.1 log (a line made for the test, after the real ones) cannot be 2024-03-01, before 0.4.1."""
    clock = clock_of(V041.read_text())
    assert clock("INFO 03-01 09:00:00 api_server.py:1] restarted") == datetime(2025, 3, 1, 9, 0)


def test_never_in_the_future() -> None:
    """A present before the first year after the release (a clock behind the log): the latest past year, as if the
    log named no version, and the note does not cite it."""
    clock = LineClock(now=datetime(2024, 5, 1))
    clock.learn_year(V041.read_text())
    moment = clock(WEIGHTS_041)
    assert moment is not None and moment <= datetime(2024, 5, 1) and moment.year == 2023
    assert clock.guessed == 2023 and clock.guessed_after is None
    assert clock.guess_reason == "nothing in the log says which"


def test_a_dated_line_wins_over_the_version() -> None:
    clock = clock_of("2023-07-07 15:10:02 job started\n" + V041.read_text())
    assert clock(WEIGHTS_041) == datetime(2023, 5, 4, 14, 43, 20)
    assert clock.guessed is None


def test_the_fixed_year_wins_over_the_version() -> None:
    clock = clock_of(V041.read_text(), year=2025)
    assert clock(WEIGHTS_041) == datetime(2025, 5, 4, 14, 43, 20)
    assert clock.guessed is None


def test_without_a_version_line_the_latest_past_year() -> None:
    clock = clock_of(without_versions(V041.read_text()))
    assert clock.release is None
    assert clock(WEIGHTS_041) == datetime(2026, 5, 4, 14, 43, 20)
    assert clock.guessed == 2026 and clock.guess_reason == "nothing in the log says which"
    clock = clock_of(NO_VERSION.read_text())
    moment = clock("ERROR 07-07 15:19:51 [core.py:515] EngineCore failed to start.")
    assert moment == datetime(2026, 7, 7, 15, 19, 51) and clock.guessed_after is None


def test_the_oldest_version_named_bounds_the_log() -> None:
    clock = clock_of(V042.read_text() + V041.read_text())
    assert clock.release is not None and clock.release.version == "0.4.1"


def test_the_clock_has_learned_before_the_other_readers_see_the_window() -> None:
    clock, seen = LineClock(now=NOW), []
    list(scan_text_log(V041, clock=clock, on_window=lambda window: seen.append(clock.release)))
    assert seen and seen[0] is not None and seen[0].version == "0.4.1"


def test_the_note_names_the_version(db, run_cli, sql) -> None:
    """The start-up report of 015 (engine_memory, dated by the start-up reader's clock) takes 2024."""
    assert run_cli("ingest", V041, "--db", db, "--quiet").exit_code == 0
    ((ts,),) = sql("SELECT ts FROM engine_memory")
    assert ts == datetime(2024, 5, 4, 14, 43, 20)
    assert sql("SELECT note FROM sources") == [(NOTE_041,)]


def test_the_note_names_the_version_of_an_oom_log(tmp_path, db, run_cli, sql) -> None:
    """The OOM scan's clock: the year-less V1 OOM of 029 after the engine line of 028 (two real logs spliced, for
    the clock's sake: the OOM did not happen under 0.4.2)."""
    log = tmp_path / "engine.log"
    log.write_text(V042.read_text().splitlines()[1] + "\n" + NO_VERSION.read_text())
    assert run_cli("ingest", log, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT ts FROM oom_events") == [(datetime(2024, 7, 7, 15, 19, 48),)]
    assert sql("SELECT note FROM sources") == [
        (
            "lines without a year read as 2024: the earliest not before vLLM 0.4.2 (2024-05-04), the version the log"
            " states (pass --at to place them)",
        )
    ]


def test_at_still_gives_the_year(db, run_cli, sql) -> None:
    assert run_cli("ingest", V041, "--db", db, "--at", "2025-05-05T00:00", "--quiet").exit_code == 0
    assert sql("SELECT ts FROM engine_memory") == [(datetime(2025, 5, 4, 14, 43, 20),)]
    assert sql("SELECT note FROM sources") == [(None,)]
