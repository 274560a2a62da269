"""The one registry of op calculators: op names -> a small pure function -> FLOPs, bytes, params.

Adding an op is one decorator line and one function::

    @register("torch.nn.functional.linear", "aten::linear", family="gemm")
    def linear(a: Args) -> Estimate: ...

A name registered twice is refused with a message naming both functions, so a plugin cannot silently
replace a built-in formula.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from pyprof.common import UsageError

#: Families whose FLOPs ``torch.utils.flop_counter`` also counts (GEMMs, convolutions, attention).
#: Per-step totals meant to be compared with ``FlopCounterMode`` sum only these (docs/formulas.md).
COUNTED_FAMILIES = frozenset({"gemm", "conv", "attention"})

#: Families whose kernels can run on Tensor Cores (the ``tc`` column is 0 rather than ``-`` when they do not).
TC_FAMILIES = COUNTED_FAMILIES


class Estimate(NamedTuple):
    """What a formula returns: FLOPs, bytes moved (each input read once, each output written once) and a
    short params string. ``flops``/``bytes`` are None only together with a ``reason``."""

    flops: int | None
    bytes: int | None
    params: str
    reason: str | None = None
    #: The sizes that Tensor Cores want in multiples of 8, as (name, size) pairs: a GEMM's M, N and K, a
    #: convolution's C and K (the recommendations name those that are not); () for other ops.
    tc_dims: tuple = ()


class NotModelled(Exception):
    """Raised by a formula whose arguments it cannot use; the message becomes the ``na`` reason."""


@dataclass(frozen=True, slots=True)
class Formula:
    """One registered calculator: its function, the family it belongs to, and the names it answers to."""

    fn: Callable
    family: str
    names: tuple[str, ...]
    backward: bool = False  # an explicit backward op (aten::convolution_backward): kernels get dgrad/wgrad roles

    @property
    def qualname(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"


_REGISTRY: dict[str, Formula] = {}


def register(*names: str, family: str = "other", backward: bool = False) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn`` under every name in ``names``.

    ``family`` is one of gemm, conv, attention, norm, pointwise, reduce, loss, optim, memory, misc, other.
    ``backward`` marks an explicit backward op whose GEMM/conv kernels are given dgrad/wgrad roles.
    Returns the function unchanged. Raises UsageError when a name is already taken (message names both).
    """
    if not names:
        raise UsageError("register() needs at least one op name")

    def deco(fn: Callable) -> Callable:
        formula = Formula(fn, family, tuple(names), backward)
        for name in names:
            old = _REGISTRY.get(name)
            if old is not None:
                raise UsageError(f"op {name!r} is already registered to {old.qualname}; "
                                 f"refusing to register it again to {formula.qualname}")
        for name in names:
            _REGISTRY[name] = formula
        return fn

    return deco


def get(name: str) -> Formula | None:
    """Return the formula registered under exactly ``name``, or None."""
    return _REGISTRY.get(name)


def names() -> list[str]:
    """Return every registered op name, sorted."""
    return sorted(_REGISTRY)


def formulas() -> list[Formula]:
    """Return each registered formula once (in registration order)."""
    seen: dict[int, Formula] = {}
    for f in _REGISTRY.values():
        seen.setdefault(id(f), f)
    return list(seen.values())


def unregister(*names_: str) -> None:
    """Remove names (for tests and for plugins that deliberately replace a formula)."""
    for n in names_:
        _REGISTRY.pop(n, None)
