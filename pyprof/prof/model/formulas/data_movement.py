"""Data movement: casts and copies, cat/stack, indexing, gather/scatter, masked ops, fills, random, embedding.

FLOPs are 0 except where arithmetic happens (scatter_add/index_add: 1 per source element; embedding_bag:
1 per gathered element; embedding backward: 1 per gradient element accumulated). Random-number generation
is integer work and counts 0 FLOPs. Bytes: each input read once, each output written once; a gather reads
only the gathered rows, a scatter writes only the scattered rows; outputs whose size depends on data
(masked_select, boolean indexing) are given their upper bound (docs/formulas.md).
"""
from __future__ import annotations

from math import prod

from pyprof.prof.model.args import Args, Tensor, broadcast, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def _t(t: Tensor) -> str:
    return "(" + ",".join(map(str, t.shape)) + ")"


def copy(src: Tensor, dst_dtype: str | None, role: str = "fprop") -> Estimate:
    """Read every element of ``src``, write it in ``dst_dtype``."""
    dst_dtype = dst_dtype or src.dtype
    p = f"T={_t(src)},{short_dtype(src.dtype)}" + (f"->{short_dtype(dst_dtype)}" if dst_dtype != src.dtype else "")
    if role != "fprop":  # the gradient flows back through the copy/cast
        return estimate(0, [(src.numel, dst_dtype), (src.numel, src.dtype)], p + ",bprop")
    return estimate(0, [(src.numel, src.dtype), (src.numel, dst_dtype)], p)


def _dtype_arg(a: Args) -> str | None:
    for e in a.entries:
        if e.get("type") == "dtype":
            return e.get("value")
    return a.value(None, "dtype", None)


@register("torch.Tensor.to", "aten::to", "aten::_to_copy", "torch.Tensor.type", "torch.clone", "aten::clone",
          "torch.Tensor.contiguous", "aten::contiguous", "torch.Tensor.to_dense", family=Family.MEMORY)
def to_copy(a: Args) -> Estimate:
    """to(dtype)/_to_copy/clone/contiguous: a cast or copy of the input; dtype from a dtype argument."""
    return copy(a.tensor(0), _dtype_arg(a), a.role)


def _cast(dtype: str):
    def formula(a: Args) -> Estimate:
        return copy(a.tensor(0), dtype, a.role)

    formula.__name__ = formula.__qualname__ = f"cast_to_{dtype}"
    formula.__doc__ = f"Tensor cast to {dtype}: read the input, write it as {dtype}."
    return formula


for _m, _d in {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64",
               "int": "int32", "long": "int64", "bool": "bool", "short": "int16", "char": "int8",
               "byte": "uint8"}.items():
    register(f"torch.Tensor.{_m}", family=Family.MEMORY)(_cast(_d))


@register("torch.Tensor.copy", "aten::copy", family=Family.MEMORY)
def copy_(a: Args) -> Estimate:
    """self.copy_(src): read src, write self (in self's dtype)."""
    dst, src = a.tensor(0), a.tensor(1, "src")
    return copy(src, dst.dtype, a.role)


@register("torch.cat", "torch.concat", "torch.concatenate", "aten::cat", "aten::_cat", "aten::concat",
          "torch.stack", "aten::stack", "torch.hstack", "torch.vstack", "torch.dstack", family=Family.MEMORY)
def cat(a: Args) -> Estimate:
    """cat/stack(tensors, dim): read every input, write the same number of elements."""
    ts = a.tensors()
    if not ts:
        raise NotModelled("no tensors")
    n = sum(t.numel for t in ts)
    p = f"n={len(ts)},N={n},{short_dtype(ts[0].dtype)}"
    return estimate(0, [(t.numel, t.dtype) for t in ts] + [(n, ts[0].dtype)], p + ("" if a.role == "fprop" else ",bprop"))


def _gather_like(x: Tensor, index: Tensor, out_n: int, role: str, flops: int = 0) -> Estimate:
    p = f"T={_t(x)},index={_t(index)},{short_dtype(x.dtype)}"
    if role != "fprop":  # backward scatters (adds) the gradient back: one add per element
        return estimate(out_n, [(out_n, x.dtype), (index.numel, index.dtype), (out_n, x.dtype)], p + ",bprop")
    return estimate(flops, [(index.numel, index.dtype), (out_n, x.dtype), (out_n, x.dtype)], p)


@register("torch.index_select", "aten::index_select", family=Family.MEMORY)
def index_select(a: Args) -> Estimate:
    """index_select(x, dim, index): reads the index and the selected slices, writes them."""
    x, dim, index = a.tensor(0), int(a.value(1, "dim", 0)), a.tensor(2, "index")
    if not x.shape:
        raise NotModelled("0-d input")
    return _gather_like(x, index, x.numel // x.shape[dim] * index.numel, a.role)


@register("torch.gather", "aten::gather", "torch.take_along_dim", family=Family.MEMORY)
def gather(a: Args) -> Estimate:
    """gather(x, dim, index): one element read and written per index element."""
    x, index = a.tensor(0), a.tensor(2, "index")
    return _gather_like(x, index, index.numel, a.role)


@register("torch.Tensor.__getitem__", "aten::index", family=Family.MEMORY)
def index(a: Args) -> Estimate:
    """x[idx] with integer index tensors on the leading dims (aten::index(self, indices)). Boolean masks give
    the upper bound (every element selected). Slices and ints are views (no kernel) and not modelled here."""
    x = a.tensor(0)
    idx = [t for t in a.tensors()[1:]]
    if not idx:
        raise NotModelled("indexing without index tensors (a view or a slice copy)")
    if any(t.dtype in ("bool", "uint8") for t in idx):
        return _gather_like(x, idx[0], x.numel, a.role)
    lead = prod(broadcast(*(t.shape for t in idx)))
    return _gather_like(x, idx[0], lead * prod(x.shape[len(idx):]), a.role)


@register("torch.scatter", "aten::scatter", "torch.index_copy", "aten::index_copy", "torch.index_put",
          "aten::index_put", "aten::_index_put_impl", "torch.Tensor.__setitem__", family=Family.MEMORY)
def scatter(a: Args) -> Estimate:
    """scatter(x, dim, index, src) and friends, in place: reads the index and the source elements,
    writes as many elements of x."""
    x = a.tensor(0)
    rest = a.tensors()[1:]
    if not rest:
        raise NotModelled("no index/source tensor")
    n = max(t.numel for t in rest)
    idx = rest[0]
    p = f"T={_t(x)},index={_t(idx)},{short_dtype(x.dtype)}"
    return estimate(0, [(t.numel, t.dtype) for t in rest] + [(n, x.dtype)], p + ("" if a.role == "fprop" else ",bprop"))


@register("torch.scatter_add", "aten::scatter_add", "torch.scatter_reduce", "aten::scatter_reduce",
          "torch.index_add", "aten::index_add", "torch.index_reduce", family=Family.MEMORY)
def scatter_add(a: Args) -> Estimate:
    """scatter_add/index_add(x, dim, index, src): scatter plus one FLOP per source element; x read and written
    at the scattered positions."""
    est = scatter(a)
    rest = a.tensors()[1:]
    n = max(t.numel for t in rest)
    return est._replace(flops=n, bytes=None if est.bytes is None else est.bytes + n * a.tensor(0).nbytes // max(
        a.tensor(0).numel, 1))


@register("torch.masked_fill", "aten::masked_fill", "torch.Tensor.masked_fill", family=Family.MEMORY)
def masked_fill(a: Args) -> Estimate:
    """masked_fill(x, mask, value): reads x and the mask, writes x (a select per element, 0 FLOPs)."""
    x, mask = a.tensor(0), a.tensor(1, "mask")
    n = prod(broadcast(x.shape, mask.shape))
    return estimate(0, [(x.numel, x.dtype), (mask.numel, mask.dtype), (n, x.dtype)],
                    f"T={_t(x)},mask={_t(mask)},{short_dtype(x.dtype)}")


@register("torch.masked_select", "aten::masked_select", "torch.masked_scatter", "aten::masked_scatter",
          family=Family.MEMORY)
def masked_select(a: Args) -> Estimate:
    """masked_select/masked_scatter(x, mask, ...): reads x and mask, writes at most every element (upper bound:
    the real count depends on the mask's values)."""
    x, mask = a.tensor(0), a.tensor(1, "mask")
    n = prod(broadcast(x.shape, mask.shape))
    return estimate(0, [(x.numel, x.dtype), (mask.numel, mask.dtype), (n, x.dtype)],
                    f"T={_t(x)},mask={_t(mask)},{short_dtype(x.dtype)},upper-bound")
