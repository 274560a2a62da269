"""The one registry of op calculators: op names -> a small pure function -> FLOPs, bytes, params.

Adding an op is one decorator line and one function::

    @register("torch.nn.functional.linear", "aten::linear", family=Family.GEMM)
    def linear(a: Args) -> Estimate: ...

A name registered twice is refused with a message naming both functions, so a plugin cannot silently
replace a built-in formula.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, NamedTuple

from pyprof.common import UsageError


class Family(str, enum.Enum):
    """What kind of work an op is. Besides naming its section of docs/formulas.md, the family decides how prof
    treats the kernels of the op's calls:

    - ``GEMM``, ``CONV``, ``ATTENTION`` (the matrix families, MATRIX_FAMILIES): the call's work runs in a matrix
      library kernel (cuBLAS/cuBLASLt, cuDNN, CUTLASS, FlashAttention, Tensile, Composable Kernel). Its other
      kernels (layout transposes, split-K reductions, casts, element-wise epilogues: prof.kernels.is_helper)
      are *helpers* and get 0 FLOPs, the numbers going to the matrix kernels. So an op whose only kernel is
      element-wise (an outer product: a broadcast multiply) must not be a matrix family: its one kernel would
      be a helper and its FLOPs lost. These three families are also the ones whose FLOPs PyTorch's
      FlopCounterMode counts (COUNTED_FAMILIES: per-step totals compared with it sum only these), and whose
      kernels can run on Tensor Cores: the TC column says 1 or 0 for them, ``-`` for every other family.
    - ``GEMM``, ``CONV`` in backward (GRAD_FAMILIES): their kernels compute one of two gradients, the input's
      (dgrad) or the weight's (wgrad), told apart by the kernel name or, without one, by their order in the call.
    - every other family (``NORM``, ``POINTWISE``, ``REDUCE``, ``LOSS``, ``OPTIM``, ``MEMORY``, ``MISC``,
      ``OTHER``): every kernel of the call does the op's work, and the call's FLOPs and bytes are shared among
      them by duration. Their FLOPs are pyprof's own count (FlopCounterMode counts none).
    - ``TRANSFER`` is no op's: it marks a copy to or from the host or another GPU (bound by PCIe/NVLink, not by
      this GPU's memory), which has no roofline.
    """

    GEMM = "gemm"
    CONV = "conv"
    ATTENTION = "attention"
    NORM = "norm"
    POINTWISE = "pointwise"
    REDUCE = "reduce"
    LOSS = "loss"
    OPTIM = "optim"
    MEMORY = "memory"
    MISC = "misc"
    OTHER = "other"
    TRANSFER = "transfer"

    def __str__(self) -> str:  # "gemm" in messages and tables, on every Python (3.12 changed str-enum format)
        return self.value

    __format__ = str.__format__


#: The families whose calls run a matrix library kernel, and whose other kernels are helpers (Family says more).
MATRIX_FAMILIES = frozenset({Family.GEMM, Family.CONV, Family.ATTENTION})
#: Families whose FLOPs ``torch.utils.flop_counter`` also counts: per-step totals meant to be compared with
#: ``FlopCounterMode`` sum only these (docs/formulas.md).
COUNTED_FAMILIES = MATRIX_FAMILIES
#: Families whose kernels can run on Tensor Cores (the ``tc`` column is 0 rather than ``-`` when they do not).
TC_FAMILIES = MATRIX_FAMILIES
#: Families whose backward kernels compute the input's or the weight's gradient (dgrad / wgrad roles).
GRAD_FAMILIES = frozenset({Family.GEMM, Family.CONV})


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
    family: Family
    names: tuple[str, ...]
    backward: bool = False  # an explicit backward op (aten::convolution_backward): kernels get dgrad/wgrad roles

    @property
    def qualname(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"


_REGISTRY: dict[str, Formula] = {}


def register(*names: str, family: Family | str = Family.OTHER,
             backward: bool = False) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn`` under every name in ``names``.

    ``family``: a Family (or its value, ``"pointwise"``, as plugins may write it); it decides which kernels of
    the op's calls are helpers, whether its FLOPs are compared with FlopCounterMode and what the TC column says
    (Family's docstring). ``backward`` marks an explicit backward op whose GEMM/conv kernels are given
    dgrad/wgrad roles. Returns the function unchanged. Raises UsageError when a name is already taken (message
    names both) or the family is unknown.
    """
    if not names:
        raise UsageError("register() needs at least one op name")
    try:
        family = Family(family)
    except ValueError:
        raise UsageError(f"register({names[0]!r}): family {family!r} is not one of "
                         f"{', '.join(f.value for f in Family if f is not Family.TRANSFER)}") from None

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
