"""`oomlab estimate`: the formulas against the real H200 captures and public configs, cards, limits, the CLI.

The captured model has no config.json; `tests/data/estimate/llama_mini_h200.config.json` is written from
the capture's README and sample_logs/FLEET.md (see tests/data/estimate/README.md).
"""

from __future__ import annotations

import gzip
import json
import statistics

import pytest

from oomlab.analyses import estimate as lib
from oomlab.analyses.fleet.sizing import CARDS, DEFAULT_CONTEXT_BYTES
from oomlab.cli.estimate import DTYPES, KV_DTYPES
from oomlab.errors import InputError

from conftest import DATA, H200, read_jsonl_gz

CONFIGS = DATA / "estimate"
MINI = CONFIGS / "llama_mini_h200.config.json"
LLAMA2 = CONFIGS / "llama2_7b.config.json"
LLAMA3 = CONFIGS / "llama3_8b.config.json"
SHAPE_7B = ("--params", "7B", "--dtype", "bf16", "--layers", 32, "--kv-heads", 32, "--head-dim", 128)


def _ok_requests(scenario: str) -> list[dict]:
    return [r for r in read_jsonl_gz(H200 / scenario / "requests.jsonl.gz") if r["status"] == "ok"]


def test_public_configs_count_their_published_parameters():
    assert lib.shape_from_config(str(LLAMA2)).params == 6_738_415_616
    llama3 = lib.shape_from_config(str(LLAMA3))
    assert llama3.params == 8_030_261_248
    assert (llama3.kv_heads, llama3.head_dim, llama3.dtype) == (8, 128, "bf16")
    assert lib.kv_bytes_per_token(llama3) == 2 * 32 * 8 * 128 * 2  # grouped-query attention: 8 KV heads
    assert lib.shape_from_config(str(LLAMA2), dtype="int4", params=7_000_000_000).params == 7_000_000_000


def test_weights_estimate_matches_the_captured_model_at_start():
    with gzip.open(H200 / "serve_mixed" / "memory_stats_start.json.gz", "rt") as handle:
        stats = json.load(handle)
    measured = stats["requested_bytes.all.current"]  # 336,627,840: weights + the 128-byte rotary inv_freq
    estimated = lib.weights_bytes(lib.shape_from_config(str(MINI)))
    assert estimated <= measured
    assert (measured - estimated) / measured < 0.0001


def test_kv_estimate_matches_the_kv_cache_the_leaking_service_kept():
    # serve_leak appends every request's past_key_values to a global list: what a request leaves allocated
    # is its KV cache, of input + output - 1 tokens (the last sampled token never runs through the model).
    shape = lib.shape_from_config(str(MINI))
    per_token = lib.kv_bytes_per_token(shape)
    assert per_token == 32_768
    ratios = [
        (r["allocated_after"] - r["allocated_before"])
        / (per_token * r["batch_size"] * (r["input_sequence_length"] + r["output_sequence_length"] - 1))
        for r in _ok_requests("serve_leak")
    ]
    assert len(ratios) == 44
    assert min(ratios) == 1.0  # the estimate is never above what was kept ...
    assert abs(statistics.median(ratios) - 1.0) < 0.005  # ... and is it, to the byte, for most requests


def test_bytes_per_token_match_the_measured_slope():
    # Least-squares slope of what a request added at its peak against batch x (input + output), over
    # serve_mixed's 97 successes: 58,004. Tolerance 2 %: four times the gap between the slope and the
    # median ratio (57,688), the spread of the measurement itself.
    requests = _ok_requests("serve_mixed")
    tokens = [r["batch_size"] * (r["input_sequence_length"] + r["output_sequence_length"]) for r in requests]
    added = [r["peak_allocated"] - r["allocated_before"] for r in requests]
    measured = statistics.linear_regression(tokens, added).slope
    shape = lib.shape_from_config(str(MINI))
    estimated = lib.kv_bytes_per_token(shape) + lib.activation_bytes_per_token(shape)
    assert len(requests) == 97
    assert round(measured) == 58_004
    assert abs(estimated / measured - 1) < 0.02


def test_request_estimate_matches_each_large_request_of_the_capture():
    shape = lib.shape_from_config(str(MINI))
    for r in _ok_requests("serve_mixed"):
        work = lib.Workload(r["batch_size"], r["input_sequence_length"], r["output_sequence_length"])
        # below 8,192 tokens the allocator's rounding and the per-sequence logits weigh up to 5 %
        if work.batch * (work.input_len + work.output_len) >= 8192:
            added = r["peak_allocated"] - r["allocated_before"]
            assert abs(lib.request_bytes(shape, work) / added - 1) < 0.01, r["request_id"]


def test_parameter_counts_parse_and_bad_ones_say_why():
    assert lib.parse_params("7B") == 7_000_000_000
    assert lib.parse_params("1.8b") == 1_800_000_000
    assert lib.parse_params(" 500M ") == 500_000_000
    assert lib.parse_params("6738415616") == 6_738_415_616
    for bad in ("7X", "", "B7", "0B"):
        with pytest.raises(ValueError, match="is not a parameter count"):
            lib.parse_params(bad)


def test_cards_are_found_by_the_names_people_use():
    assert lib.card_named("H200").label == "H200 141 GB"
    assert lib.card_named("a100-80gb").label == "A100 80 GB"
    assert lib.card_named("A100 40G").label == "A100 40 GB"
    assert lib.card_named("v100").label == "V100 32 GB"
    assert lib.card_named("A10").label == "A10 24 GB"
    with pytest.raises(ValueError, match="'A100' could be A100 40 GB or A100 80 GB"):
        lib.card_named("A100")
    with pytest.raises(ValueError, match=r"^unknown GPU 'B200' \(known: T4 16 GB, A10 24 GB,"):
        lib.card_named("B200")


def test_shape_from_params_derives_a_hidden_size_near_the_real_one():
    real = lib.shape_from_config(str(LLAMA2))
    derived = lib.shape_from_params(real.params, "fp16", 32, 32, 128)
    assert derived.derived == ("hidden", "intermediate", "vocab")
    assert abs(derived.hidden / real.hidden - 1) < 0.05
    assert abs(derived.intermediate / real.intermediate - 1) < 0.05


def test_dtypes_scale_weights_and_kv_cache():
    bf16 = lib.shape_from_config(str(LLAMA3))
    int4 = lib.shape_from_config(str(LLAMA3), dtype="int4")
    assert lib.weights_bytes(int4) * 4 == lib.weights_bytes(bf16)
    assert lib.kv_bytes_per_token(int4) == lib.kv_bytes_per_token(bf16)  # weight-only quantisation
    assert lib.kv_bytes_per_token(bf16, "fp8") * 2 == lib.kv_bytes_per_token(bf16)
    assert set(DTYPES) == set(lib.DTYPE_BYTES) and set(KV_DTYPES) <= set(lib.DTYPE_BYTES)


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_the_card_is_the_smallest_holding_1_3x(batch):
    shape = lib.shape_from_config(str(LLAMA2))
    result = lib.estimate(shape, lib.Workload(batch, 2048, 512))
    assert result.total_bytes == sum(
        (result.weights_bytes, result.kv_bytes, result.activation_bytes, DEFAULT_CONTEXT_BYTES)
    )
    holding = [c for c in CARDS if c.total_bytes >= result.need_low_bytes]
    if not holding:
        assert result.card is None
        return
    card = next(c for c in CARDS if c.label == result.card)
    assert card.total_bytes == min(c.total_bytes for c in holding)
    assert card.total_bytes >= 1.3 * result.total_bytes


@pytest.mark.parametrize("gpu", ["A10", "L20", "H200"])
def test_limits_are_the_largest_batch_and_prompt_that_fit(gpu):
    shape = lib.shape_from_config(str(LLAMA3))
    card = lib.card_named(gpu)
    work = lib.Workload(4, 1024, 256)
    limits = lib.estimate(shape, work, card).limits
    assert limits is not None and limits.card == card.label

    def fits(w: lib.Workload) -> bool:
        return lib.estimate(shape, w, card).gpu_fits is True

    assert limits.max_batch >= 1 and limits.max_input_len >= 1
    assert fits(lib.Workload(limits.max_batch, 1024, 256))
    assert not fits(lib.Workload(limits.max_batch + 1, 1024, 256))
    assert fits(lib.Workload(4, limits.max_input_len, 256))
    assert not fits(lib.Workload(4, limits.max_input_len + 1, 256))


def test_config_errors_name_the_file_and_reason(tmp_path):
    broken = tmp_path / "config.json"
    broken.write_text('{\n  "hidden_size": 1024,\n  oops\n}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        lib.shape_from_config(str(broken))
    assert caught.value.message == f"{broken}:3: not JSON: Expecting property name enclosed in double quotes"
    broken.write_text(json.dumps({"hidden_size": 1024, "num_attention_heads": 16}), encoding="utf-8")
    with pytest.raises(InputError, match="no num_hidden_layers in the config"):
        lib.shape_from_config(str(broken))
    broken.write_text(json.dumps({**json.loads(LLAMA2.read_text()), "num_local_experts": 8}), encoding="utf-8")
    with pytest.raises(InputError, match="mixture-of-experts configs are not modelled"):
        lib.shape_from_config(str(broken))


def test_cli_prints_the_estimate(run_cli):
    result = run_cli(
        "estimate", "--model", LLAMA2, "--batch", 1, "--input-len", 4096, "--output-len", 256, "--gpu", "A10"
    )
    assert result.exit_code == 0, result.output
    assert "6,738,415,616 parameters x fp16" in result.stdout
    # 16.05 GiB: 1.3 x is 20.87 GiB (the A10 has 21.96), 1.5 x is 24.08 GiB
    assert "Smallest card for 1.3 x: A10 24 GB; for 1.5 x: V100 32 GB." in result.stdout
    assert "A10 24 GB holds 1.3 x the estimate (20.87 GiB)." in result.stdout
    four = run_cli(
        "estimate", "--model", LLAMA2, "--batch", 4, "--input-len", 4096, "--output-len", 256, "--gpu", "A10"
    )
    assert "A10 24 GB does not hold 1.3 x the estimate" in four.stdout


def test_cli_json_agrees_with_the_library(run_cli):
    result = run_cli(
        "estimate",
        *SHAPE_7B,
        "--batch",
        4,
        "--input-len",
        2048,
        "--output-len",
        512,
        "--kv-dtype",
        "fp8",
        "--context",
        "512MiB",
        "--json",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    shape = lib.shape_from_params(7_000_000_000, "bf16", 32, 32, 128)
    expected = lib.estimate(shape, lib.Workload(4, 2048, 512, "fp8"), context_bytes=512 << 20)
    assert document["estimate"]["total_bytes"] == expected.total_bytes
    assert document["estimate"]["kv_bytes_per_token"] == 2 * 32 * 32 * 128 * 1
    assert document["estimate"]["card"] == expected.card
    assert document["model"]["derived"] == ["hidden", "intermediate", "vocab"]
    assert document["measured"] is None


def test_cli_errors_are_one_line(run_cli, tmp_path):
    work = ("--batch", 1, "--input-len", 10, "--output-len", 10)
    bad_params = run_cli("estimate", *SHAPE_7B[:1], "7X", *SHAPE_7B[2:], *work)
    assert bad_params.exit_code == 2
    assert bad_params.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--params': '7X' is not a parameter count (write e.g. 7B, 500M or 6738415616)"
    )
    bad_gpu = run_cli("estimate", *SHAPE_7B, *work, "--gpu", "B200")
    assert bad_gpu.exit_code == 2
    assert bad_gpu.stderr.splitlines()[-1].startswith("Error: Invalid value for '--gpu': unknown GPU 'B200'")
    missing = tmp_path / "missing.json"
    unreadable = run_cli("estimate", "--model", missing, *work)
    assert unreadable.exit_code == 1
    assert unreadable.stderr == f"Error: {missing}: cannot read the config: No such file or directory\n"
    no_shape = run_cli("estimate", "--params", "7B", *work)
    assert no_shape.exit_code == 2
    assert no_shape.stderr.splitlines()[-1] == (
        "Error: give --model CONFIG.JSON, or the shape: missing --dtype, --layers, --kv-heads, --head-dim"
    )
    both = run_cli("estimate", "--model", MINI, "--layers", 4, *work)
    assert both.exit_code == 2
    assert both.stderr.splitlines()[-1] == "Error: --layers come from --model's config: give one or the other"


def test_db_sets_the_estimate_beside_the_measured_peaks(run_cli, fleet_db):
    result = run_cli(
        "estimate",
        "--model",
        MINI,
        "--batch",
        1,
        "--input-len",
        512,
        "--output-len",
        64,
        "--db",
        fleet_db,
        "--model-version",
        "llama-mini-v3",
        "--json",
    )
    assert result.exit_code == 0, result.output
    [h200] = json.loads(result.stdout)["measured"]
    assert h200["card"] == "H200 141 GB"
    assert h200["devices"] == ["gpu-b-1", "gpu-d-3"]  # serve_mixed and big_trace_cpp ran llama-mini-v3
    # the measured slope over both captures, the estimate within 2 % (test_bytes_per_token_...)
    assert abs(h200["estimated_bytes_per_token"] / h200["bytes_per_token"] - 1) < 0.02
    assert abs(h200["estimated_peak_bytes"] / h200["peak_allocated_bytes"] - 1) < 0.03
    # at rest the service also holds ~9 MiB of buffers beside the weights
    assert 0.95 < h200["estimated_weights_bytes"] / h200["at_rest_bytes"] <= 1
    # FLEET.md: the four OOM messages show 0.69-0.74 GiB outside PyTorch
    assert 0.69 <= h200["context_bytes"] / (1 << 30) <= 0.74
    table = run_cli(
        "estimate",
        "--model",
        MINI,
        "--batch",
        1,
        "--input-len",
        512,
        "--output-len",
        64,
        "--db",
        fleet_db,
        "--model-version",
        "llama-mini-v3",
    )
    assert "Measured: llama-mini-v3 on H200 141 GB (gpu-b-1, gpu-d-3; 102 requests;" in table.stdout


def test_db_without_a_known_version_lists_the_versions(run_cli, fleet_db):
    work = ("--batch", 1, "--input-len", 10, "--output-len", 10)
    unknown = run_cli("estimate", "--model", MINI, *work, "--db", fleet_db, "--model-version", "llama-9")
    assert unknown.exit_code == 1
    assert unknown.stderr.startswith(
        "Error: no successful requests of model version 'llama-9' in the database "
        "(pass --model-version; versions with requests: assist-1.8b-v1.4,"
    )
    unnamed = run_cli("estimate", "--model", MINI, *work, "--db", fleet_db)
    assert unnamed.exit_code == 1
    assert unnamed.stderr.startswith("Error: which model version to compare with? (pass --model-version;")
