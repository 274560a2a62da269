"""The registry of views: ``@view("name")`` on a function of an Aggregate (and an optional worker) returning a
Table or a list of Tables. Its own module, so that a view module imports the decorator without importing the
package that imports it."""
from __future__ import annotations

from typing import Callable

from pyprof.common import UsageError
from pyprof.prof.tables import Table

#: name -> view function, in registration order (the order of ``--view all``).
VIEWS: dict[str, Callable[..., "Table | list[Table]"]] = {}


def view(name: str) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn(agg, worker=None) -> Table | list[Table]`` under ``name``. Raises UsageError
    when the name is taken (the message names the function holding it)."""
    def deco(fn: Callable) -> Callable:
        if name in VIEWS:
            raise UsageError(f"view {name!r} is already registered to {VIEWS[name].__qualname__}")
        VIEWS[name] = fn
        return fn
    return deco
