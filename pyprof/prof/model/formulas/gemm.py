"""Matrix products. FLOPs follow torch.utils.flop_counter: 2·M·N·K per (batched) product, bias and
alpha/beta scaling ignored. Bytes: A and B read once, C written once (and a bias/self input read once).

Backward (role ``dgrad``/``wgrad``): for C = A·B, dgrad is dA = dC·Bᵀ and wgrad is dB = Aᵀ·dC, each
2·M·N·K; role ``bprop`` (kernel role unknown) is both.
"""
from __future__ import annotations

import re
from math import prod

from pyprof.prof.model.args import Args, Tensor, broadcast, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def gemm(batch: int, m: int, n: int, k: int, dtype: str | None, role: str, extra_read: int = 0,
         out_dtype: str | None = None) -> Estimate:
    """Estimate for ``batch`` products [M,K]·[K,N] of ``dtype`` in ``role``; ``extra_read`` more elements
    read (bias). Used by every GEMM-like formula so that they agree."""
    out_dtype = out_dtype or dtype
    params = f"M={m},N={n},K={k}" + (f",B={batch}" if batch != 1 else "") + f",{short_dtype(dtype)}"
    dims = (("M", m), ("N", n), ("K", k))
    a, b, c = batch * m * k, batch * k * n, batch * m * n
    if role == "dgrad":  # dA[M,K] = dC[M,N] · Bᵀ
        return estimate(2 * batch * m * n * k, [(c, out_dtype), (b, dtype), (a, dtype)], params + ",dgrad", dims)
    if role == "wgrad":  # dB[K,N] = Aᵀ · dC
        return estimate(2 * batch * m * n * k, [(a, dtype), (c, out_dtype), (b, dtype)], params + ",wgrad", dims)
    if role == "bprop":
        return estimate(4 * batch * m * n * k, [(c, out_dtype), (b, dtype), (a, dtype), (a, dtype), (b, dtype)],
                        params + ",bprop", dims)
    return estimate(2 * batch * m * n * k, [(a, dtype), (b, dtype), (extra_read, dtype), (c, out_dtype)], params,
                    dims)


def _mk_kn(a: Tensor, b: Tensor) -> tuple[int, int, int]:
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise NotModelled(f"expected 2-D operands, got {a.shape} and {b.shape}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise NotModelled(f"inner dimensions differ: {a.shape}·{b.shape}")
    return m, n, k


@register("torch.mm", "aten::mm", family=Family.GEMM)
def mm(a: Args) -> Estimate:
    """mm(A[M,K], B[K,N]): 2·M·N·K."""
    x, y = a.tensor(0), a.tensor(1)
    m, n, k = _mk_kn(x, y)
    return gemm(1, m, n, k, x.dtype, a.role)


@register("torch.addmm", "aten::addmm", family=Family.GEMM)
def addmm(a: Args) -> Estimate:
    """addmm(bias, A, B) = mm(A, B): the bias addition is ignored in FLOPs (flop_counter), its bytes read once."""
    bias, x, y = a.tensor(0), a.tensor(1), a.tensor(2)
    m, n, k = _mk_kn(x, y)
    return gemm(1, m, n, k, x.dtype, a.role, extra_read=bias.numel)


@register("torch.bmm", "aten::bmm", family=Family.GEMM)
def bmm(a: Args) -> Estimate:
    """bmm(A[B,M,K], B[B,K,N]): 2·B·M·N·K."""
    x, y = a.tensor(0), a.tensor(1)
    if len(x.shape) != 3 or len(y.shape) != 3 or x.shape[2] != y.shape[1]:
        raise NotModelled(f"bmm shapes {x.shape}·{y.shape}")
    return gemm(x.shape[0], x.shape[1], y.shape[2], x.shape[2], x.dtype, a.role)


@register("torch.baddbmm", "aten::baddbmm", family=Family.GEMM)
def baddbmm(a: Args) -> Estimate:
    """baddbmm(self, A, B) = bmm(A, B), the addition of ``self`` ignored in FLOPs and read once."""
    s, x, y = a.tensor(0), a.tensor(1), a.tensor(2)
    est = bmm(Args([_entry(x), _entry(y)], a.role))
    if a.role == "fprop" and est.bytes is not None:
        return est._replace(bytes=est.bytes + s.nbytes)
    return est


def _entry(t: Tensor) -> dict:
    return {"type": "tensor", "shape": list(t.shape), "dtype": t.dtype}


def matmul_shapes(x: tuple, y: tuple) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of torch.matmul's broadcasting rules (1-D operands promoted and squeezed)."""
    if not x or not y:
        raise NotModelled("matmul of a 0-d tensor")
    xs = (1,) + tuple(x) if len(x) == 1 else tuple(x)
    ys = tuple(y) + (1,) if len(y) == 1 else tuple(y)
    if xs[-1] != ys[-2]:
        raise NotModelled(f"matmul inner dimensions differ: {x}·{y}")
    batch = prod(broadcast(xs[:-2], ys[:-2]))
    return batch, xs[-2], ys[-1], xs[-1]


@register("torch.matmul", "aten::matmul", "torch.Tensor.__matmul__", family=Family.GEMM)
def matmul(a: Args) -> Estimate:
    """matmul with broadcasting: 2·batch·M·N·K; a 2-D weight broadcast over a batch is read once."""
    x, y = a.tensor(0), a.tensor(1)
    batch, m, n, k = matmul_shapes(x.shape, y.shape)
    if len(y.shape) <= 2 and batch > 1:  # folded into one [batch·M, K]·[K, N] product, as ATen does
        return gemm(1, batch * m, n, k, x.dtype, a.role)
    return gemm(batch, m, n, k, x.dtype, a.role)


@register("torch.nn.functional.linear", "aten::linear", family=Family.GEMM)
def linear(a: Args) -> Estimate:
    """linear(x[..., K], W[N, K], bias): M = prod(x.shape[:-1]); 2·M·N·K, bias ignored in FLOPs."""
    x, w, bias = a.tensor(0), a.tensor(1), a.tensor(2, "bias", optional=True)
    if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
        raise NotModelled(f"linear shapes {x.shape}, weight {w.shape}")
    m = prod(x.shape[:-1])
    return gemm(1, m, w.shape[0], w.shape[1], x.dtype, a.role, extra_read=bias.numel if bias else 0)


@register("torch.mv", "aten::mv", family=Family.GEMM)
def mv(a: Args) -> Estimate:
    """mv(A[M,K], x[K]) = mm with N=1."""
    x = a.tensor(0)
    a.tensor(1)  # the vector must be there: NotModelled otherwise
    if len(x.shape) != 2:
        raise NotModelled(f"mv matrix shape {x.shape}")
    return gemm(1, x.shape[0], 1, x.shape[1], x.dtype, a.role)


@register("torch.addmv", "aten::addmv", family=Family.GEMM)
def addmv(a: Args) -> Estimate:
    """addmv(self, A, x) = mv(A, x), the addition ignored."""
    return mv(Args([_entry(a.tensor(1)), _entry(a.tensor(2))], a.role))


@register("torch.dot", "torch.vdot", "aten::dot", "aten::vdot", family=Family.GEMM)
def dot(a: Args) -> Estimate:
    """dot(x[K], y[K]) = mm with M=N=1."""
    x = a.tensor(0)
    return gemm(1, 1, 1, x.numel, x.dtype, a.role)


@register("torch._scaled_mm", "aten::_scaled_mm", family=Family.GEMM)
def scaled_mm(a: Args) -> Estimate:
    """_scaled_mm(A[M,K], B[K,N], scale_a, scale_b, bias, scale_result, out_dtype): 2·M·N·K;
    scales ignored, output in ``out_dtype`` (A's dtype when not given)."""
    x, y = a.tensor(0), a.tensor(1)
    m, n, k = _mk_kn(x, y)
    return gemm(1, m, n, k, x.dtype, a.role, out_dtype=a.value(6, "out_dtype", None))


_EINSUM_OPERANDS = re.compile(r"^[a-zA-Z,]*->[a-zA-Z]*$")


@register("torch.einsum", "aten::einsum", family=Family.GEMM)
def einsum(a: Args) -> Estimate:
    """einsum(eq, A, B): 2 × the product of every index size (one multiply-add per point of the iteration
    space), as the bmm PyTorch lowers it to counts. One operand: one add per input element. No ``...``."""
    eq = str(a.value(0, "equation", "")).replace(" ", "")
    ops = a.tensors()
    if not _EINSUM_OPERANDS.match(eq):
        raise NotModelled(f"einsum equation {eq!r} not modelled (ellipsis or implicit output)")
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) != len(ops) or len(ops) not in (1, 2):
        raise NotModelled(f"einsum with {len(ops)} operands for {eq!r}")
    sizes: dict[str, int] = {}
    for term, t in zip(terms, ops):
        if len(term) != len(t.shape):
            raise NotModelled(f"einsum term {term!r} does not match shape {t.shape}")
        for ch, d in zip(term, t.shape):
            sizes[ch] = max(sizes.get(ch, 1), d)
    out_n = prod(sizes[ch] for ch in out)
    space = prod(sizes.values())
    flops = 2 * space if len(ops) == 2 else ops[0].numel
    if len(ops) == 2 and a.role in ("bprop",):
        flops *= 2
    dtype = ops[0].dtype
    return estimate(flops, [(t.numel, t.dtype) for t in ops] + [(out_n, dtype)],
                    f"eq={eq},{short_dtype(dtype)}")
