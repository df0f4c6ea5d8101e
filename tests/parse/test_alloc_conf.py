"""PYTORCH_CUDA_ALLOC_CONF as a process states it: the string's options, the log lines that set it, and the lines
of PyTorch's own messages that only name it (the OOM message's advice, the deprecation warning), which are no
setting: the real H200 captures' messages, and real logs that wrap the message onto lines of their own."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from oomlab.parse.alloc_conf import SETTINGS_FINDER, SettingsScanner, parse_alloc_conf, settings_in_line
from oomlab.parse.text.textscan import Window

from conftest import CASES, H200


def test_an_alloc_conf_string_is_split_into_its_options():
    assert parse_alloc_conf("expandable_segments:True,max_split_size_mb:128") == (
        ("expandable_segments", "true"),
        ("max_split_size_mb", "128"),
    )
    # roundup_power2_divisions' list holds commas of its own; switches are read as PyTorch reads them
    assert parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8], Expandable_Segments:1") == (
        ("roundup_power2_divisions", "[256:1,512:2,>:8]"),
        ("expandable_segments", "true"),
    )
    assert parse_alloc_conf("backend:cudaMallocAsync") == (("backend", "cudaMallocAsync"),)
    assert parse_alloc_conf("") == () and parse_alloc_conf("garbage") == ()


@pytest.mark.parametrize(
    "line, expected",
    [
        ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments")),
        ("export PYTORCH_ALLOC_CONF='expandable_segments:True'", ("PYTORCH_ALLOC_CONF", "expandable_segments")),
        (
            "2026-11-30 01:00:00 INFO env {'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:512'}",
            (None, "max_split_size_mb"),
        ),
        (
            'os.environ["PYTORCH_HIP_ALLOC_CONF"] = "garbage_collection_threshold:0.8"',
            (None, "garbage_collection_threshold"),
        ),
    ],
)
def test_a_line_that_sets_the_variable_states_settings(line: str, expected: tuple[str | None, str]):
    stated = settings_in_line(line)
    assert stated is not None
    variable, settings = stated
    assert expected[0] is None or variable == expected[0]
    assert settings[0][0] == expected[1]


def test_the_oom_messages_of_the_real_captures_state_no_setting():
    """Every PyTorch 2.11 OOM message advises expandable_segments, also in a capture that runs with it on."""
    text = gzip.decompress((H200 / "fragmentation_expandable" / "oom_messages.txt.gz").read_bytes()).decode()
    lines = [line for line in text.splitlines() if "ALLOC_CONF" in line]
    assert len(lines) == 2
    assert [settings_in_line(line) for line in lines] == [None, None]


def _scan(text: str) -> list[tuple[int, tuple[tuple[str, str], ...]]]:
    data = text.encode()
    scanner = SettingsScanner(lambda _line: None)
    scanner.window(Window(data, 0, 0, len(data)))
    return [(s.line, s.settings) for s in scanner.found]


@pytest.mark.parametrize(
    "case",
    ["069_vllm_sampler-warmup-wrapper-then-sentence-per-line-oom", "065_pytorch_email-reply-wrapped-72-cols-then-tqdm"],
)
def test_a_wrapped_oom_message_and_the_deprecation_warning_state_no_setting(case: str):
    """Real logs: vLLM prints the message a sentence per line, so `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    to avoid fragmentation.` stands alone, followed by PyTorch's warning that the name is deprecated."""
    text = (CASES / "realworld" / "oom" / case / "artifact.log").read_text(encoding="utf-8")
    assert "ALLOC_CONF" in text
    assert _scan(text) == []


def test_advice_wrapped_right_after_the_value_is_not_a_setting():
    # derived from the 069 case above: the same advice wrapped one word earlier, as a 72-column reflow does
    text = (
        "If reserved but unallocated memory is large try setting\n"
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "to avoid fragmentation.\n"
    )
    assert _scan(text) == []


def test_the_scan_reads_a_setting_line_among_others(tmp_path: Path):
    text = (
        "INFO loading model\n"
        "INFO PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6\n"
        "Warning: PYTORCH_CUDA_ALLOC_CONF is deprecated, use PYTORCH_ALLOC_CONF instead\n"
    )
    assert _scan(text) == [(2, (("expandable_segments", "true"), ("garbage_collection_threshold", "0.6")))]
    assert SETTINGS_FINDER.markers == (b"_ALLOC_CONF",)
