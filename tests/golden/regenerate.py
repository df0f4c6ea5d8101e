"""Rewrite the golden outputs from the bundled sample data: `python tests/golden/regenerate.py`.

Run it (with the test extras installed) after a change that is meant to alter a view or a finding, review
`git diff --stat tests/golden` and the values that changed, and commit the files together with the change.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from golden_spec import (
    FINDINGS_FILE,
    VIEWS,
    VIEWS_DIR,
    connect,
    dump_findings,
    findings_json,
    golden_file,
    ingest_samples,
    read_view,
    write_view,
)


def main() -> None:
    """Ingest the samples into a scratch database, then write every golden file from it."""
    with tempfile.TemporaryDirectory(prefix="oomlab-golden-") as scratch:
        db_path = Path(scratch) / "golden.duckdb"
        ingest_samples(db_path)
        VIEWS_DIR.mkdir(exist_ok=True)
        con = connect(db_path)
        try:
            for view in VIEWS:
                frame = read_view(con, view)
                write_view(frame, view)
                print(f"{golden_file(view).name:40} {frame.height:>8} rows {_kib(golden_file(view)):>7} KiB")
        finally:
            con.close()
        FINDINGS_FILE.write_text(dump_findings(findings_json(db_path)), encoding="utf-8")
    listed = {golden_file(v) for v in VIEWS}
    for stale in sorted(set(VIEWS_DIR.glob("*.parquet")) - listed):
        stale.unlink()  # a view no longer compared: its file would only mislead
        print(f"removed {stale.name}")
    total = sum(p.stat().st_size for p in [*listed, FINDINGS_FILE]) / 1024
    print(f"{FINDINGS_FILE.name:40} {'':>13} {_kib(FINDINGS_FILE):>7} KiB\ntotal {total:.0f} KiB")


def _kib(path: Path) -> int:
    return round(path.stat().st_size / 1024)


if __name__ == "__main__":
    main()
