"""Optimizer steps: fused (``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_``) and foreach multi-tensor
kernels. N is the total number of parameter elements in the call.

- Adam: 13 FLOPs per element: m = β1·m + (1-β1)·g (3), v = β2·v + (1-β2)·g² (4),
  denom = √v/√bc2 + ε (3), p -= (lr/bc1)·m/denom (3); AdamW adds 1 (p ·= 1 - lr·wd), Adam with
  weight_decay adds 2 (g += wd·p), amsgrad 1 (max). Bytes: reads p, g, m, v and writes p, m, v (7·N
  elements, each list in its own dtype), amsgrad reads and writes max_v too.
- SGD: 2 FLOPs per element (p -= lr·g), 4 with momentum (buf = μ·buf + g); reads p, g (and buf), writes
  p (and buf).
- foreach ops: the per-element cost of the matching pointwise op over every tensor of the first list;
  every tensor of every list read once, the first list written once (in place or as the output); except
  zero and fill, which only write the first list, copy, which reads its source list and writes the first, and
  norm and max, which read the first list and write one element per tensor.
"""
from __future__ import annotations

from pyprof.prof.model.args import Args, estimate, short_dtype
from pyprof.prof.model.formulas.pointwise import BINARY, TERNARY, UNARY
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def _lists(a: Args, count: int) -> list:
    out = a.lists()[:count]
    return out + [[] for _ in range(count - len(out))]


def _total(ts: list) -> int:
    return sum(t.numel for t in ts)


def adam(a: Args, adamw: bool) -> Estimate:
    """The shared Adam/AdamW estimate (module docstring)."""
    params, grads, m, v, vmax = _lists(a, 5)
    if not params:
        raise NotModelled("parameter list without its tensors (not recorded by the trace)")
    n = _total(params)
    amsgrad = bool(a.value(None, "amsgrad", False))
    wd = float(a.value(None, "weight_decay", 0) or 0)
    flops = 13 + (1 if adamw and wd else 0) + (2 if not adamw and wd else 0) + (1 if amsgrad else 0)
    io = []
    for lst, times in ((params, 2), (grads, 1), (m, 2), (v, 2), (vmax if amsgrad else [], 2)):
        io += [(t.numel, t.dtype) for t in lst] * times
    dtype = params[0].dtype
    return estimate(flops * n, io, f"tensors={len(params)},N={n},{short_dtype(dtype)}" + (",amsgrad" if amsgrad else ""))


@register("aten::_fused_adam", "torch._fused_adam", family=Family.OPTIM)
def fused_adam(a: Args) -> Estimate:
    """_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, ...)."""
    return adam(a, adamw=False)


@register("aten::_fused_adamw", "torch._fused_adamw", family=Family.OPTIM)
def fused_adamw(a: Args) -> Estimate:
    """_fused_adamw_(...): Adam with decoupled weight decay."""
    return adam(a, adamw=True)


@register("aten::_fused_sgd", "torch._fused_sgd", family=Family.OPTIM)
def fused_sgd(a: Args) -> Estimate:
    """_fused_sgd_(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, ...)."""
    params, grads, bufs = _lists(a, 3)
    if not params:
        raise NotModelled("parameter list without its tensors (not recorded by the trace)")
    momentum = float(a.value(None, "momentum", 0) or 0)
    n = _total(params)
    io = [(t.numel, t.dtype) for t in params] * 2 + [(t.numel, t.dtype) for t in grads]
    if momentum:
        io += [(t.numel, t.dtype) for t in bufs] * 2
    return estimate((4 if momentum else 2) * n, io,
                    f"tensors={len(params)},N={n},{short_dtype(params[0].dtype)}" + (",momentum" if momentum else ""))


#: foreach ops that overwrite their first list without reading it: a fill, or a copy from the second list
_OVERWRITE = {"zero", "fill", "copy"}
#: foreach reductions: one element written per tensor of the first list, not the list
_REDUCE = {"norm", "max"}


def foreach(a: Args, cost: int, name: str = "") -> Estimate:
    """The shared foreach estimate (module docstring); ``name`` is the op's (``add`` for ``_foreach_add_``)."""
    lists = a.lists()
    if not lists or not lists[0]:
        raise NotModelled("tensor list without its tensors (not recorded by the trace)")
    first = lists[0]
    n = _total(first)
    read = lists[1:] if name in _OVERWRITE else lists
    io = [(t.numel, t.dtype) for lst in read for t in lst]
    io += [(1 if name in _REDUCE else t.numel, t.dtype) for t in first]
    return estimate(cost * n, io, f"tensors={len(first)},N={n},{short_dtype(first[0].dtype)}")


def _make(name: str, cost: int):
    def formula(a: Args) -> Estimate:
        return foreach(a, cost, name)

    formula.__name__ = formula.__qualname__ = f"foreach_{name}"
    formula.__doc__ = f"_foreach_{name}: {cost} FLOP(s) per element of the first list."
    return formula


_FOREACH = {n: c for n, c in {**UNARY, **BINARY, **TERNARY}.items()
            if n in {"add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "rsqrt", "exp", "log",
                     "neg", "abs", "reciprocal", "sign", "maximum", "minimum", "clamp_min", "clamp_max", "pow",
                     "sigmoid", "tanh", "erf", "floor", "ceil", "round", "trunc", "frac", "sin", "cos"}}
_FOREACH.update({"copy": 0, "zero": 0, "fill": 0, "norm": 2, "max": 1})
for _n, _c in _FOREACH.items():
    register(f"aten::_foreach_{_n}", f"torch._foreach_{_n}", family=Family.OPTIM)(_make(_n, _c))
