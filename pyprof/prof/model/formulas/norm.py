"""Normalisations. FLOPs per element (torch.utils.flop_counter counts none; these are extra information):

- batch/layer/group/instance norm: 7 = mean (1 add) + variance (2: subtract, multiply-add)
  + normalise (2: subtract, multiply by the reciprocal std) + affine (2: multiply, add). Statistics over
  a reduced axis are counted once per element; the per-channel/row rsqrt is ignored.
- rms_norm: 4 = square-and-accumulate (2) + scale (1) + weight (1).
Bytes: read x once, write y once, plus the (small) weight, bias and running statistics.
Backward (role bprop): twice the forward FLOPs; reads dy and x, writes dx (weight/bias grads are small).
"""
from __future__ import annotations

from pyprof.prof.model.args import Args, Tensor, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, register


def norm(x: Tensor, per_element: int, params_numel: int, role: str, extra: str = "") -> Estimate:
    """Shared estimate: ``per_element`` FLOPs per element of x, ``params_numel`` weight/bias/stat elements."""
    p = f"T=({','.join(map(str, x.shape))}){extra},{short_dtype(x.dtype)}"
    if role != "fprop":
        return estimate(2 * per_element * x.numel, [(x.numel, x.dtype)] * 3 + [(params_numel, x.dtype)],
                        p + ",bprop")
    return estimate(per_element * x.numel, [(x.numel, x.dtype), (x.numel, x.dtype), (params_numel, x.dtype)], p)


def _numel(*ts: Tensor | None) -> int:
    return sum(t.numel for t in ts if t is not None)


@register("torch.nn.functional.batch_norm", "torch.batch_norm", "aten::batch_norm", "aten::_batch_norm_impl_index",
          "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::_native_batch_norm_legit",
          "aten::_native_batch_norm_legit_no_training", "aten::miopen_batch_norm", family=Family.NORM)
def batch_norm(a: Args) -> Estimate:
    """batch_norm(x, running_mean, running_var, weight, bias, training, ...): 7 FLOPs per element."""
    x = a.tensor(0, "input")
    ts = [a.tensor(i, n, optional=True) for i, n in ((1, "running_mean"), (2, "running_var"),
                                                     (3, "weight"), (4, "bias"))]
    return norm(x, 7, _numel(*ts), a.role)


@register("torch.nn.functional.layer_norm", "torch.layer_norm", "aten::layer_norm", "aten::native_layer_norm",
          family=Family.NORM)
def layer_norm(a: Args) -> Estimate:
    """layer_norm(x, normalized_shape, weight, bias, eps): 7 FLOPs per element."""
    x = a.tensor(0, "input")
    return norm(x, 7, _numel(a.tensor(2, "weight", optional=True), a.tensor(3, "bias", optional=True)), a.role)


@register("torch.nn.functional.rms_norm", "torch.rms_norm", "aten::rms_norm", "aten::_fused_rms_norm",
          family=Family.NORM)
def rms_norm(a: Args) -> Estimate:
    """rms_norm(x, normalized_shape, weight, eps): 4 FLOPs per element."""
    x = a.tensor(0, "input")
    return norm(x, 4, _numel(a.tensor(2, "weight", optional=True)), a.role)


@register("torch.nn.functional.group_norm", "torch.group_norm", "aten::group_norm", "aten::native_group_norm",
          family=Family.NORM)
def group_norm(a: Args) -> Estimate:
    """group_norm(x, num_groups, weight, bias, eps): 7 FLOPs per element."""
    x = a.tensor(0, "input")
    g = a.value(1, "num_groups", None)
    return norm(x, 7, _numel(a.tensor(2, "weight", optional=True), a.tensor(3, "bias", optional=True)), a.role,
                f",G={g}" if g is not None else "")


@register("torch.nn.functional.instance_norm", "torch.instance_norm", "aten::instance_norm", family=Family.NORM)
def instance_norm(a: Args) -> Estimate:
    """instance_norm(x, running_mean, running_var, weight, bias, ...): 7 FLOPs per element."""
    x = a.tensor(0, "input")
    ts = [a.tensor(i, n, optional=True) for i, n in ((1, "running_mean"), (2, "running_var"),
                                                     (3, "weight"), (4, "bias"))]
    return norm(x, 7, _numel(*ts), a.role)


@register("torch.nn.functional.normalize", family=Family.NORM)
def normalize(a: Args) -> Estimate:
    """normalize(x, p=2, dim=1): 3 FLOPs per element (square-accumulate 2, divide 1)."""
    return norm(a.tensor(0, "input"), 3, 0, a.role)
