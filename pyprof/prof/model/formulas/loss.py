"""Losses. FLOPs per input element: cross_entropy 6 (log_softmax 5 + gather/negate/sum 1), nll_loss 1 per
sample, mse 3 (subtract, square, accumulate), l1 3, smooth_l1/huber 4, binary cross-entropy 6, with logits 8,
kl_div 4. Bytes: the input and target read once, the loss written (N elements for reduction='none', else 1).
Backward (bprop): the forward's FLOPs; reads the input (and target), writes the input's gradient.
"""
from __future__ import annotations

from pyprof.prof.model.args import Args, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, register

_PER_ELEMENT = {"cross_entropy": 6, "mse_loss": 3, "l1_loss": 3, "smooth_l1_loss": 4, "huber_loss": 4,
                "binary_cross_entropy": 6, "binary_cross_entropy_with_logits": 8, "kl_div": 4,
                "soft_margin_loss": 4, "cosine_embedding_loss": 6, "poisson_nll_loss": 3}


def loss(a: Args, per_element: int, name: str) -> Estimate:
    """The shared loss estimate (module docstring)."""
    x, t = a.tensor(0, "input"), a.tensor(1, "target")
    reduction = a.value(None, "reduction", "mean")
    out_n = (x.shape[0] if x.shape else 1) if reduction == "none" else 1
    flops = per_element * x.numel if name != "nll_loss" else t.numel
    p = f"T=({','.join(map(str, x.shape))}),target=({','.join(map(str, t.shape))}),{short_dtype(x.dtype)}"
    if a.role != "fprop":
        return estimate(flops, [(x.numel, x.dtype), (t.numel, t.dtype), (x.numel, x.dtype)], p + ",bprop")
    return estimate(flops, [(x.numel, x.dtype), (t.numel, t.dtype), (out_n, x.dtype)], p)


def _make(name: str, cost: int):
    def formula(a: Args) -> Estimate:
        return loss(a, cost, name)

    formula.__name__ = formula.__qualname__ = name
    formula.__doc__ = f"{name}: {cost} FLOP(s) per input element" if name != "nll_loss" else "nll_loss: 1 per target"
    return formula


for _name, _cost in {**_PER_ELEMENT, "nll_loss": 1}.items():
    _names = [f"torch.nn.functional.{_name}", f"aten::{_name}"]
    if _name == "nll_loss":
        _names += ["aten::nll_loss_nd", "aten::nll_loss_forward", "aten::nll_loss2d", "aten::nll_loss2d_forward"]
    if _name == "cross_entropy":
        _names += ["aten::cross_entropy_loss"]
    register(*_names, family=Family.LOSS)(_make(_name, _cost))
