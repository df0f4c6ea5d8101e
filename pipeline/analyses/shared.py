"""Results shared between analyses inside one report or findings run, so each is computed once.

The findings and the weekly report ask for the same process lifetimes, OOM classification and forecasts
several times over (classification needs lifetimes, leak findings need both, the report draws them again).
Inside `shared_results()` a function marked `@shared` returns the frame it computed earlier for the same
connection and arguments; outside, it computes every time, so a caller that writes to the database between
calls never sees a stale result. Frames are not copied: polars frames are not changed in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_STORE: ContextVar[dict[tuple[Any, ...], Any] | None] = ContextVar("oomlab_shared_results", default=None)


@contextmanager
def shared_results() -> Iterator[None]:
    """Share `@shared` results until the block ends (nested blocks reuse the outer store)."""
    if _STORE.get() is not None:
        yield
        return
    token = _STORE.set({})
    try:
        yield
    finally:
        _STORE.reset(token)


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
