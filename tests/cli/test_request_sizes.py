"""A size no allocation or card can have is a usage error in one line (issue 36), not an answer: `--request
-1GiB` was said to fit in a 1.7 MiB block. The snapshot is the real H200 serve_leak capture's first OOM."""

from __future__ import annotations

import pytest

from conftest import H200

SNAPSHOT = H200 / "serve_leak" / "snapshot_first_oom.pickle.gz"


@pytest.mark.parametrize(
    "option, size, shown",
    [
        ("--request", "-1GiB", "-1,073,741,824"),
        ("--request", "0", "0"),
        ("--request", "99999TiB", "109,950,063,265,972,224"),
        ("--device-total", "-80GiB", "-85,899,345,920"),
    ],
)
def test_a_size_no_allocation_can_have_is_refused(run_cli, option, size, shown):
    result = run_cli("snapshot", "inspect", SNAPSHOT, f"{option}={size}")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {option} {shown} bytes: no allocation or card is that size (1 B to 4.00 TiB)"
    )


def test_a_real_size_still_answers(run_cli):
    result = run_cli("snapshot", "inspect", SNAPSHOT, "--request", "44MiB")
    assert result.exit_code == 0 and "a request of 44.00 MiB" in result.stdout
