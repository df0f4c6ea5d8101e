"""Paths in the weekly job's config read as a shell would (issue 36): `~` is the home folder, `${VAR}` a
variable's value, and a variable that is not set is an error naming it and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomlab.weekly.config import ConfigError, load_config

FLEET = Path(__file__).parent.parent.parent / "sample_logs" / "fleet"


def _config(tmp_path: Path, database: str, inputs: str) -> Path:
    path = tmp_path / "oomlab.toml"
    path.write_text(f'database = "{database}"\noutput = "out"\n[[inputs]]\npaths = ["{inputs}"]\n', encoding="utf-8")
    return path


def test_home_and_variables_expand(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FLEET_LOGS", str(FLEET))
    config = load_config(_config(tmp_path, "~/oomlab/fleet.duckdb", "${FLEET_LOGS}/requests"))
    assert config.database == tmp_path / "home" / "oomlab" / "fleet.duckdb"
    assert config.inputs[0].paths == (str(FLEET / "requests"),)


def test_an_unset_variable_names_itself_and_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_FLEET", raising=False)
    with pytest.raises(ConfigError) as caught:
        load_config(_config(tmp_path, "fleet.duckdb", "$NO_SUCH_FLEET/requests"))
    assert "inputs[0].paths" in str(caught.value.message) and "${NO_SUCH_FLEET} is not set" in caught.value.message
