"""Results shared between analyses inside one report or findings run, so each is computed once.

The findings and the weekly report ask for the same process lifetimes, OOM classification and forecasts
several times over (classification needs lifetimes, leak findings need both, the report draws them again).
Inside `shared_results()` a function marked `@shared` returns the frame it computed earlier for the same
connection and arguments; outside, it computes every time, so a caller that writes to the database between
calls never sees a stale result. Frames are not copied: polars frames are not changed in place.

A view that every query must compute whole (`materialized`) is kept the same way: as a temporary table of the
block, dropped when the block ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import duckdb

P = ParamSpec("P")
R = TypeVar("R")

_STORE: ContextVar[dict[tuple[Any, ...], Any] | None] = ContextVar("oomlab_shared_results", default=None)


@contextmanager
def shared_results() -> Iterator[None]:
    """Share `@shared` results until the block ends (nested blocks reuse the outer store)."""
    if _STORE.get() is not None:
        yield
        return
    store: dict[tuple[Any, ...], Any] = {}
    token = _STORE.set(store)
    try:
        yield
    finally:
        _STORE.reset(token)
        _drop_materialized(store)


_MATERIALIZED = "materialized view"  # the first item of the store keys of `materialized`


def materialized(con: duckdb.DuckDBPyConnection, view: str) -> None:
    """Inside a `shared_results` block, compute `view` once into a temporary table of the same name: DuckDB
    looks a name up in the temporary schema first, in the queries and in the views and macros they call, so every
    later query of the block reads the rows computed here. Outside a block, nothing: each query computes the view.

    Only for a view no filter of a query reaches into (computed over all the history: analyses/fleet/whole_history),
    whose rows are few; a temporary table is allowed on a read-only connection."""
    store = _STORE.get()
    key = (_MATERIALIZED, id(con), view)
    if store is None or key in store:
        return
    con.execute(f"CREATE TEMP TABLE {view} AS SELECT * FROM {view}")
    store[key] = con


def _drop_materialized(store: dict[tuple[Any, ...], Any]) -> None:
    """Drop the block's temporary tables: a later query on the connection (after an ingest, say) reads the view."""
    for key, con in store.items():
        if key[0] == _MATERIALIZED:
            with suppress(duckdb.ConnectionException):  # a closed connection took its temporary tables with it
                con.execute(f"DROP TABLE IF EXISTS temp.{key[2]}")


def shared(*, ignore: tuple[str, ...] = ()) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark an analysis `f(con, *args, **kwargs)` whose result depends only on the data and its hashable
    arguments; `ignore` names keyword arguments that only pass in what the function would compute anyway."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            store = _STORE.get()
            if store is None:
                return fn(*args, **kwargs)
            con, rest = args[0], args[1:]
            named = tuple(sorted((k, v) for k, v in kwargs.items() if k not in ignore))
            key = (fn.__module__, fn.__qualname__, id(con), rest, named)
            if key not in store:
                store[key] = fn(*args, **kwargs)
            return store[key]  # type: ignore[no-any-return]

        return wrapper

    return decorate
