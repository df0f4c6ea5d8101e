"""load/portable.py: oomlab's DuckDB SQL for Spark. The engines' agreement on every aggregate is tested in
test_aggregate_engines.py; here, the rewrites themselves."""

from __future__ import annotations

import re

import pytest

from oomlab.errors import DatabaseError
from oomlab.load.portable import for_engine
from oomlab.load.sql import names_in, sql_text


def test_a_broadcast_comment_becomes_sparks_hint_and_stays_a_comment_for_duckdb() -> None:
    sql = "CREATE VIEW v AS SELECT /*+ BROADCAST(b) */ r.x FROM r JOIN b ON b.i = r.i"
    (spark,) = for_engine(sql, "spark")
    assert "SELECT /*+ BROADCAST(b) */ r.x" in spark and spark.startswith("CREATE TEMPORARY VIEW")
    (duck,) = for_engine(sql, "duckdb")
    assert "BROADCAST" not in duck  # a comment, which DuckDB's planner does without


def test_a_comment_that_is_no_hint_is_refused() -> None:
    for hint in ("BROADCAST(", "BROADCASTX(b)", "42", "MERGE(b)"):
        with pytest.raises(DatabaseError, match="not a Spark hint"):
            for_engine(f"CREATE VIEW v AS SELECT /*+ {hint} */ 1", "spark")


def test_every_hint_in_sql_names_a_relation_of_its_select() -> None:
    """A hint naming no relation of its SELECT is ignored by Spark without a word: each must name one that the
    statement defines or reads."""
    hinted = 0
    for name in [*names_in("views"), *names_in("aggregates")]:
        for statement in for_engine(sql_text(name), "spark"):
            for hint in re.findall(r"/\*\+ BROADCAST\(([^)]*)\) \*/", statement):
                hinted += 1
                for alias in (a.strip() for a in hint.split(",")):
                    assert re.search(rf"\bAS {alias}\b", statement), (name, alias)
    assert hinted >= 4
