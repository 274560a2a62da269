"""Fills, random numbers, embeddings, pooling, interpolation and padding (docs/formulas.md).

- Fills and random: 0 FLOPs (random-number generation is integer work), the output written once.
- embedding: a gather of rows, 0 FLOPs; embedding_bag adds 1 FLOP per gathered element (sum/mean);
  the backward accumulates each gradient row into the weight gradient (1 FLOP per element).
- pooling: max and avg count one compare/add per window element per output element (the divide of avg is
  ignored); adaptive pooling touches every input element once (1 FLOP each). Indices (int64) are written
  when the op returns them.
- interpolate: per output element, nearest 0, linear 3 (2 taps: 2 multiplies, 1 add), bilinear 7 (4 taps),
  bicubic 31 (16 taps), trilinear 15 (8 taps); area is adaptive average pooling.
"""
from __future__ import annotations

import math
from math import prod

from pyprof.prof.model.args import Args, Tensor, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def _t(t: Tensor) -> str:
    return "(" + ",".join(map(str, t.shape)) + ")"


@register("torch.Tensor.zero", "aten::zero", "torch.Tensor.fill", "aten::fill", "torch.zeros_like",
          "torch.ones_like", "torch.full_like", "torch.empty_like", "aten::zeros_like", "aten::ones_like",
          "aten::full_like", "torch.Tensor.uniform", "torch.Tensor.normal", "torch.Tensor.bernoulli",
          "torch.bernoulli", "torch.Tensor.random", "torch.Tensor.exponential", "torch.Tensor.geometric",
          "torch.Tensor.log_normal", "torch.Tensor.cauchy", "torch.rand_like", "torch.randn_like",
          "torch.randint_like", "aten::uniform", "aten::normal", "aten::bernoulli", "aten::random",
          "aten::exponential", "aten::rand_like", "aten::randn_like", family=Family.MISC)
def fill_like(a: Args) -> Estimate:
    """A fill or random fill of a tensor shaped like the first argument: writes it once, 0 FLOPs."""
    x = a.tensor(0)
    dtype = a.value(None, "dtype", None) or x.dtype
    return estimate(0, [(x.numel, dtype)], f"T={_t(x)},{short_dtype(dtype)}")


def _size(a: Args) -> tuple[int, ...]:
    v = a.value(0, "size", None)
    if isinstance(v, (list, tuple)):
        return tuple(int(d) for d in v)
    dims = []
    for e in a.entries:
        if e.get("name"):
            break
        if e.get("type") != "int":
            break
        dims.append(int(e["value"]))
    if not dims:
        raise NotModelled("size argument missing")
    return tuple(dims)


@register("torch.zeros", "torch.ones", "torch.full", "torch.rand", "torch.randn", "aten::zeros", "aten::ones",
          "aten::full", "aten::rand", "aten::randn", family=Family.MISC)
def fill_new(a: Args) -> Estimate:
    """zeros/ones/full/rand/randn(size, dtype=float32): writes prod(size) elements, 0 FLOPs."""
    size = _size(a)
    dtype = a.value(None, "dtype", "float32")
    return estimate(0, [(prod(size), dtype)], f"T=({','.join(map(str, size))}),{short_dtype(dtype)}")


@register("torch.nn.functional.embedding", family=Family.MISC)
def embedding(a: Args) -> Estimate:
    """F.embedding(input, weight): reads the indices and n·D weight elements, writes n·D."""
    return _embedding(a.tensor(0, "input"), a.tensor(1, "weight"), a.role)


@register("aten::embedding", "torch.embedding", family=Family.MISC)
def aten_embedding(a: Args) -> Estimate:
    """aten::embedding(weight, indices, ...): the same as F.embedding with the arguments swapped."""
    return _embedding(a.tensor(1, "indices"), a.tensor(0, "weight"), a.role)


def _embedding(idx: Tensor, w: Tensor, role: str) -> Estimate:
    if len(w.shape) != 2:
        raise NotModelled(f"embedding weight shape {w.shape}")
    n = idx.numel * w.shape[1]
    p = f"I={_t(idx)},W={_t(w)},{short_dtype(w.dtype)}"
    if role != "fprop":  # dW[idx] += dY: reads dY and the indices, read-modify-writes n rows
        return estimate(n, [(n, w.dtype), (idx.numel, idx.dtype), (n, w.dtype), (n, w.dtype)], p + ",bprop")
    return estimate(0, [(idx.numel, idx.dtype), (n, w.dtype), (n, w.dtype)], p)


@register("torch.nn.functional.embedding_bag", family=Family.MISC)
def embedding_bag(a: Args) -> Estimate:
    """F.embedding_bag(input, weight, offsets, ...): gathers n rows and sums them into bags (1 FLOP each)."""
    return _bag(a.tensor(0, "input"), a.tensor(1, "weight"), a.tensor(2, "offsets", optional=True), a.role)


@register("aten::embedding_bag", "aten::_embedding_bag", "torch.embedding_bag", family=Family.MISC)
def aten_embedding_bag(a: Args) -> Estimate:
    """aten::embedding_bag(weight, indices, offsets, ...)."""
    return _bag(a.tensor(1, "indices"), a.tensor(0, "weight"), a.tensor(2, "offsets", optional=True), a.role)


def _bag(idx: Tensor, w: Tensor, offsets: Tensor | None, role: str) -> Estimate:
    if len(w.shape) != 2:
        raise NotModelled(f"embedding_bag weight shape {w.shape}")
    d = w.shape[1]
    bags = idx.shape[0] if len(idx.shape) == 2 else (offsets.numel if offsets is not None else 1)
    n = idx.numel * d
    p = f"I={_t(idx)},W={_t(w)},bags={bags},{short_dtype(w.dtype)}"
    if role != "fprop":
        return estimate(n, [(bags * d, w.dtype), (idx.numel, idx.dtype), (n, w.dtype), (n, w.dtype)], p + ",bprop")
    return estimate(n, [(idx.numel, idx.dtype), (n, w.dtype), (bags * d, w.dtype)], p)


def _pool(a: Args, kind: str, with_indices: bool) -> Estimate:
    x = a.tensor(0, "input")
    d = int(a.value(None, "__ndim__", 0)) or _pool_ndim(x)
    try:
        k = a.ints(1, "kernel_size", d, 1)
    except NotModelled:
        # emit_nvtx records no kernel size: with the output's shape (the out= entry parse found) the bytes are
        # known, the FLOPs (one per window element) are not.
        out_t = a.tensor(None, "out", optional=True)
        if out_t is None or len(out_t.shape) != len(x.shape):
            raise
        out_n = out_t.numel
        p = f"T={_t(x)},out={'x'.join(map(str, out_t.shape[-d:]))},{short_dtype(x.dtype)}"
        est = _pool_est(x, out_n, 0, with_indices, a.role, p)
        return est._replace(flops=None, reason="kernel_size not recorded: FLOPs not modelled, bytes are")
    stride = a.value(2, "stride", None)
    s = k if stride in (None, [], ()) else a.ints(2, "stride", d, 1)
    pad = a.ints(3, "padding", d, 0)
    if kind == "max":
        dil, ceil = a.ints(4, "dilation", d, 1), bool(a.value(5, "ceil_mode", False))
        with_indices = with_indices or bool(a.value(6, "return_indices", False))
    else:
        dil, ceil = (1,) * d, bool(a.value(4, "ceil_mode", False))
    rnd = math.ceil if ceil else math.floor
    spatial = x.shape[-d:]
    out = tuple(int(rnd((i + 2 * p - dl * (kk - 1) - 1) / ss)) + 1
                for i, p, dl, kk, ss in zip(spatial, pad, dil, k, s))
    out_n = prod(x.shape[:-d]) * prod(out)
    p = f"T={_t(x)},k={'x'.join(map(str, k))},out={'x'.join(map(str, out))},{short_dtype(x.dtype)}"
    return _pool_est(x, out_n, out_n * prod(k), with_indices, a.role, p)


def _pool_ndim(x: Tensor) -> int:
    return max(1, min(3, len(x.shape) - 2))


def _pool_est(x: Tensor, out_n: int, flops: int, with_indices: bool, role: str, p: str) -> Estimate:
    if role != "fprop":  # reads dY (and the indices), writes dX
        io = [(out_n, x.dtype), (out_n if with_indices else 0, "int64"), (x.numel, x.dtype)]
        return estimate(flops, io, p + ",bprop")
    return estimate(flops, [(x.numel, x.dtype), (out_n, x.dtype), (out_n if with_indices else 0, "int64")], p)


def _make_pool(kind: str, d: int, with_indices: bool):
    def formula(a: Args) -> Estimate:
        return _pool(Args(a.entries + [{"name": "__ndim__", "type": "int", "value": d}], a.role), kind, with_indices)

    formula.__name__ = formula.__qualname__ = f"{kind}_pool{d}d" + ("_with_indices" if with_indices else "")
    formula.__doc__ = (f"{kind}_pool{d}d(input, kernel_size, stride=kernel_size, padding=0, ...): "
                       "one compare/add per window element per output element.")
    return formula


for _d in (1, 2, 3):
    register(f"torch.nn.functional.max_pool{_d}d", f"torch.max_pool{_d}d", f"aten::max_pool{_d}d",
             family=Family.MISC)(_make_pool("max", _d, False))
    register(f"aten::max_pool{_d}d_with_indices", f"torch.nn.functional.max_pool{_d}d_with_indices",
             family=Family.MISC)(_make_pool("max", _d, True))
    register(f"torch.nn.functional.avg_pool{_d}d", f"torch.avg_pool{_d}d", f"aten::avg_pool{_d}d",
             family=Family.MISC)(_make_pool("avg", _d, False))


def _adaptive(kind: str, d: int):
    def formula(a: Args) -> Estimate:
        x = a.tensor(0, "input")
        size = a.value(1, "output_size", None)
        out_t = a.tensor(None, "out", optional=True)
        if (size is None or isinstance(size, str)) and out_t is not None and len(out_t.shape) == len(x.shape):
            size = list(out_t.shape[-d:])  # emit_nvtx: the output's shape, found by parse (the out= entry)
        if size is None:
            raise NotModelled("output_size missing")
        size = list(size) if isinstance(size, (list, tuple)) else [size] * d
        out = tuple(x.shape[-d + i] if s is None else int(s) for i, s in enumerate(size))
        out_n = prod(x.shape[:-d]) * prod(out)
        p = f"T={_t(x)},out={'x'.join(map(str, out))},{short_dtype(x.dtype)}"
        return _pool_est(x, out_n, x.numel, kind == "max" and "indices" in formula.__name__, a.role, p)

    formula.__name__ = formula.__qualname__ = f"adaptive_{kind}_pool{d}d"
    formula.__doc__ = f"adaptive_{kind}_pool{d}d(input, output_size): every input element touched once (1 FLOP)."
    return formula


for _d in (1, 2, 3):
    for _k in ("avg", "max"):
        register(f"torch.nn.functional.adaptive_{_k}_pool{_d}d", f"torch.adaptive_{_k}_pool{_d}d",
                 f"aten::adaptive_{_k}_pool{_d}d", f"aten::_adaptive_{_k}_pool{_d}d",
                 family=Family.MISC)(_adaptive(_k, _d))

_TAPS_FLOPS = {"nearest": 0, "nearest-exact": 0, "linear": 3, "bilinear": 7, "bicubic": 31, "trilinear": 15,
               "area": 1}


@register("torch.nn.functional.interpolate", "torch.nn.functional.upsample", family=Family.MISC)
def interpolate(a: Args) -> Estimate:
    """interpolate(input, size=None, scale_factor=None, mode='nearest', ...): FLOPs per output element by mode
    (module docstring); reads the input once, writes the output once."""
    x = a.tensor(0, "input")
    d = len(x.shape) - 2
    if d < 1:
        raise NotModelled(f"interpolate input shape {x.shape}")
    mode = a.value(3, "mode", "nearest")
    if mode not in _TAPS_FLOPS:
        raise NotModelled(f"mode={mode!r}")
    size, scale = a.value(1, "size", None), a.value(2, "scale_factor", None)
    if size is not None:
        out = tuple(size) if isinstance(size, (list, tuple)) else (size,) * d
    elif scale is not None:
        sc = tuple(scale) if isinstance(scale, (list, tuple)) else (scale,) * d
        out = tuple(int(math.floor(i * float(f))) for i, f in zip(x.shape[2:], sc))
    else:
        raise NotModelled("neither size nor scale_factor")
    out_n = x.shape[0] * x.shape[1] * prod(out)
    flops = x.numel if mode == "area" else _TAPS_FLOPS[mode] * out_n
    p = f"T={_t(x)},out={'x'.join(map(str, out))},{mode},{short_dtype(x.dtype)}"
    if a.role != "fprop":
        return estimate(flops, [(out_n, x.dtype), (x.numel, x.dtype)], p + ",bprop")
    return estimate(flops, [(x.numel, x.dtype), (out_n, x.dtype)], p)


@register("aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
          "aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_bicubic2d",
          "aten::upsample_trilinear3d", family=Family.MISC)
def upsample(a: Args) -> Estimate:
    """aten::upsample_*(self, output_size, ...): as interpolate, the mode from the op name is not known here,
    so the cheapest (nearest, 0 FLOPs) is NOT assumed: FLOPs are 1 per output element (a documented floor)."""
    x = a.tensor(0)
    size = a.value(1, "output_size", None)
    if not isinstance(size, (list, tuple)):
        raise NotModelled("output_size missing")
    out_n = x.shape[0] * x.shape[1] * prod(size)
    return estimate(out_n, [(x.numel, x.dtype), (out_n, x.dtype)],
                    f"T={_t(x)},out={'x'.join(map(str, size))},{short_dtype(x.dtype)}")


@register("torch.nn.functional.pad", "aten::pad", "aten::constant_pad_nd", "aten::reflection_pad2d",
          "aten::replication_pad2d", family=Family.MISC)
def pad(a: Args) -> Estimate:
    """pad(input, pad, mode, value): reads the input, writes the padded output; 0 FLOPs."""
    x = a.tensor(0, "input")
    pads = a.value(1, "pad", ())
    if not isinstance(pads, (list, tuple)) or len(pads) % 2:
        raise NotModelled("pad argument missing")
    shape = list(x.shape)
    for i in range(len(pads) // 2):
        shape[-1 - i] += int(pads[2 * i]) + int(pads[2 * i + 1])
    return estimate(0, [(x.numel, x.dtype), (prod(shape), x.dtype)],
                    f"T={_t(x)},out=({','.join(map(str, shape))}),{short_dtype(x.dtype)}")
