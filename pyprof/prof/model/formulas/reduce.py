"""Reductions and scans: one FLOP per input element (two for var/std/norm: square and accumulate, logsumexp
three), reads the input once, writes the reduced output once. The output size comes from ``dim``/``keepdim``
(all dims when ``dim`` is absent). Backward (bprop): broadcasting the output gradient back, 1 FLOP per input
element, reads dy (and x), writes dx. arg-reductions write int64 indices.
"""
from __future__ import annotations

from math import prod

from pyprof.prof.model.args import Args, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register

_COST = {"sum": 1, "mean": 1, "nansum": 1, "nanmean": 1, "prod": 1, "max": 1, "min": 1, "amax": 1, "amin": 1,
         "argmax": 1, "argmin": 1, "all": 1, "any": 1, "count_nonzero": 1, "aminmax": 2, "var": 2, "std": 2,
         "var_mean": 2, "std_mean": 2, "norm": 2, "logsumexp": 3, "cumsum": 1, "cumprod": 1,
         "linalg.vector_norm": 2}
_SCANS = {"cumsum", "cumprod"}
_INDEX_OUT = {"argmax", "argmin"}


def reduction(a: Args, name: str, cost: int) -> Estimate:
    """The shared reduction estimate (module docstring)."""
    x = a.tensor(0, "input")
    if name in _SCANS:
        out_n = x.numel
    else:
        dim = a.value(1, "dim", None)
        if name in ("norm", "linalg.vector_norm"):  # (input, p/ord, dim, ...)
            dim = a.value(2, "dim", None)
        if dim is None or isinstance(dim, str):
            out_n = 1
        else:
            dims = dim if isinstance(dim, (list, tuple)) else [dim]
            try:
                reduced = prod(x.shape[int(d)] for d in dims) if x.shape else 1
            except (IndexError, ValueError, TypeError):
                raise NotModelled(f"dim={dim} for shape {x.shape}") from None
            out_n = x.numel // max(reduced, 1)
    out_dtype = "int64" if name in _INDEX_OUT else ("bool" if name in ("all", "any") else x.dtype)
    p = f"T=({','.join(map(str, x.shape))}),{short_dtype(x.dtype)}"
    if a.role != "fprop":
        return estimate(x.numel, [(out_n, x.dtype), (x.numel, x.dtype), (x.numel, x.dtype)], p + ",bprop")
    return estimate(cost * x.numel, [(x.numel, x.dtype), (out_n, out_dtype)], p)


def _make(name: str, cost: int):
    def formula(a: Args) -> Estimate:
        return reduction(a, name, cost)

    formula.__name__ = formula.__qualname__ = f"reduce_{name.replace('.', '_')}"
    formula.__doc__ = f"{name}: {cost} FLOP(s) per input element."
    return formula


for _name, _cost in _COST.items():
    register(f"torch.{_name}", f"aten::{_name.split('.')[-1]}" if "." not in _name else "aten::linalg_vector_norm",
             family=Family.REDUCE)(_make(_name, _cost))
