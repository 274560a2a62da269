"""Scaled dot-product attention in all its forms (math, flash, memory-efficient, cuDNN), as
torch.utils.flop_counter counts it: forward = the two batched GEMMs Q·Kᵀ and P·V
(2·B·H·Lq·Lk·D + 2·B·H·Lq·Lk·Dv); backward = its five GEMMs (recomputed Q·Kᵀ, dP = dO·Vᵀ, dV = Pᵀ·dO,
dQ = dS·K, dK = dSᵀ·Q). Softmax, scaling and masking are not counted. A causal mask is not halved
(flop_counter does not either). H is the number of query heads (grouped-query attention included).

Bytes: Q, K, V read once and O written once (plus the logsumexp row statistics for the backward);
the Lq×Lk score matrix is assumed to stay on chip (true of the fused kernels; the math form writes it,
so its bytes are under-counted).
"""
from __future__ import annotations

from pyprof.prof.model.args import Args, Tensor, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def sdpa(q: Tensor, k: Tensor, v: Tensor, role: str) -> Estimate:
    """Estimate for attention of q [..., H, Lq, D], k [..., Hkv, Lk, D], v [..., Hkv, Lk, Dv]."""
    if len(q.shape) < 2 or len(k.shape) != len(q.shape) or len(v.shape) != len(q.shape):
        raise NotModelled(f"attention shapes q{q.shape} k{k.shape} v{v.shape}")
    *lead, lq, d = q.shape
    lk, dv = k.shape[-2], v.shape[-1]
    bh = 1
    for x in lead:
        bh *= x
    if k.shape[-1] != d or v.shape[-2] != lk:
        raise NotModelled(f"attention shapes q{q.shape} k{k.shape} v{v.shape}")
    dtype = q.dtype
    params = f"B*H={bh},Lq={lq},Lk={lk},D={d}" + (f",Dv={dv}" if dv != d else "") + f",{short_dtype(dtype)}"
    qn, kn, vn, on = q.numel, k.numel, v.numel, bh * lq * dv
    if role == "fprop":
        flops = 2 * bh * lq * lk * d + 2 * bh * lq * lk * dv
        return estimate(flops, [(qn, dtype), (kn, dtype), (vn, dtype), (on, dtype), (bh * lq, "float32")], params)
    flops = 2 * bh * lq * lk * d * 3 + 2 * bh * lq * lk * dv * 2
    # reads q, k, v, o, dO, logsumexp; writes dq, dk, dv
    io = [(qn, dtype), (kn, dtype), (vn, dtype), (on, dtype), (on, dtype), (bh * lq, "float32"),
          (qn, dtype), (kn, dtype), (vn, dtype)]
    return estimate(flops, io, params + ",bprop")


@register("torch.nn.functional.scaled_dot_product_attention", "aten::scaled_dot_product_attention",
          "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
          "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_attention_math",
          "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_fused_attention_overrideable",
          family=Family.ATTENTION)
def scaled_dot_product_attention(a: Args) -> Estimate:
    """sdpa(query, key, value, ...): forward two GEMMs; as the forward of a backward node, the five GEMMs."""
    return sdpa(a.tensor(0, "query"), a.tensor(1, "key"), a.tensor(2, "value"), "fprop" if a.role == "fprop"
                else "bprop")


@register("aten::_scaled_dot_product_flash_attention_backward",
          "aten::_scaled_dot_product_efficient_attention_backward",
          "aten::_scaled_dot_product_cudnn_attention_backward",
          "aten::_scaled_dot_product_flash_attention_for_cpu_backward", family=Family.ATTENTION)
def scaled_dot_product_attention_backward(a: Args) -> Estimate:
    """The explicit backward ops: (grad_out, query, key, value, ...): the five GEMMs."""
    return sdpa(a.tensor(1, "query"), a.tensor(2, "key"), a.tensor(3, "value"), "bprop")


def _blhd(t: Tensor) -> Tensor:
    """[B, L, H, D] (the flash / efficient kernels' own layout) as [B, H, L, D]; a varlen [total, H, D] as [H, total, D]."""
    s = t.shape
    if len(s) == 4:
        return Tensor((s[0], s[2], s[1], s[3]), t.dtype)
    if len(s) == 3:
        return Tensor((s[1], s[0], s[2]), t.dtype)
    raise NotModelled(f"attention input shape {s}")


@register("aten::_flash_attention_forward", "aten::_efficient_attention_forward", family=Family.ATTENTION)
def flash_attention_forward(a: Args) -> Estimate:
    """_flash/_efficient_attention_forward(query, key, value, ...) with q as [B, Lq, H, D]: the sdpa formula.
    Variable-length batches ([total, H, D]) are counted as one sequence of the total length (an upper bound)."""
    return sdpa(_blhd(a.tensor(0, "query")), _blhd(a.tensor(1, "key")), _blhd(a.tensor(2, "value")),
                "fprop" if a.role == "fprop" else "bprop")


@register("aten::_flash_attention_backward", "aten::_efficient_attention_backward", family=Family.ATTENTION)
def flash_attention_backward(a: Args) -> Estimate:
    """_flash/_efficient_attention_backward(grad_out, query, key, value, ...) in [B, L, H, D]: five GEMMs."""
    return sdpa(_blhd(a.tensor(1, "query")), _blhd(a.tensor(2, "key")), _blhd(a.tensor(3, "value")), "bprop")
