"""The aten backward ops that PyTorch traces name inside autograd nodes (``native_layer_norm_backward``,
``threshold_backward``, ``_softmax_backward_data`` ...). Each costs what the backward of its forward op costs
in the forward op's formula (role ``bprop``), computed from the backward op's own arguments, so that the
numbers agree whichever of the two a record names.
"""
from __future__ import annotations

from math import prod

from pyprof.prof.model.args import Args, Tensor, estimate, short_dtype
from pyprof.prof.model.formulas.norm import norm
from pyprof.prof.model.formulas.pointwise import UNARY, elementwise
from pyprof.prof.model.formulas.pointwise import softmax as softmax_formula
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def _entry(t: Tensor) -> dict:
    return {"type": "tensor", "shape": list(t.shape), "dtype": t.dtype}


def _params_numel(*ts: Tensor | None) -> int:
    return sum(t.numel for t in ts if t is not None)


@register("aten::native_layer_norm_backward", family=Family.NORM)
def layer_norm_backward(a: Args) -> Estimate:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, mask):
    layer_norm's backward (2 × 7 FLOPs per element)."""
    x = a.tensor(1, "input")
    return norm(x, 7, _params_numel(a.tensor(5, "weight", optional=True), a.tensor(6, "bias", optional=True)), "bprop")


@register("aten::native_batch_norm_backward", "aten::miopen_batch_norm_backward", family=Family.NORM)
def batch_norm_backward(a: Args) -> Estimate:
    """native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, ...):
    batch_norm's backward (2 × 7 FLOPs per element)."""
    x = a.tensor(1, "input")
    return norm(x, 7, _params_numel(a.tensor(2, "weight", optional=True)) * 2, "bprop")


@register("aten::cudnn_batch_norm_backward", family=Family.NORM)
def cudnn_batch_norm_backward(a: Args) -> Estimate:
    """cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var, ...):
    batch_norm's backward (2 × 7 FLOPs per element)."""
    x = a.tensor(0, "input")
    return norm(x, 7, _params_numel(a.tensor(2, "weight", optional=True)) * 2, "bprop")


@register("aten::native_group_norm_backward", family=Family.NORM)
def group_norm_backward(a: Args) -> Estimate:
    """native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, mask):
    group_norm's backward (2 × 7 FLOPs per element)."""
    x = a.tensor(1, "input")
    return norm(x, 7, _params_numel(a.tensor(4, "weight", optional=True)) * 2, "bprop")


def _activation_backward(name: str, cost: int):
    def formula(a: Args) -> Estimate:
        return elementwise(Args([_entry(a.tensor(1))], "bprop"), cost, None, name)

    formula.__name__ = formula.__qualname__ = f"{name}_backward"
    formula.__doc__ = (f"{name}_backward(grad_output, self or output, ...): {name}'s backward, {cost} FLOP(s) per "
                       "element; reads dY and the saved tensor, writes dX.")
    return formula


for _n in ("threshold", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "leaky_relu", "elu", "softplus",
           "hardswish", "hardsigmoid", "mish", "logsigmoid", "softshrink", "hardshrink"):
    register(f"aten::{_n}_backward", family=Family.POINTWISE)(_activation_backward(_n, UNARY[_n]))


@register("aten::_softmax_backward_data", "aten::_log_softmax_backward_data", family=Family.POINTWISE)
def softmax_backward_data(a: Args) -> Estimate:
    """_(log_)softmax_backward_data(grad_output, output, dim, input_dtype): softmax's backward (4 per element)."""
    return softmax_formula(Args([_entry(a.tensor(1, "output")), {"type": "int", "value": a.value(2, "dim", -1)}],
                                "bprop"))


@register("aten::native_dropout_backward", family=Family.POINTWISE)
def dropout_backward(a: Args) -> Estimate:
    """native_dropout_backward(grad_output, mask, scale): 1 FLOP per element; reads dY and the mask, writes dX."""
    g, mask = a.tensor(0), a.tensor(1, "mask")
    return estimate(g.numel, [(g.numel, g.dtype), (mask.numel, mask.dtype), (g.numel, g.dtype)],
                    f"T=({','.join(map(str, g.shape))}),{short_dtype(g.dtype)},bprop")


@register("aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward",
          "aten::avg_pool2d_backward", "aten::avg_pool3d_backward", "aten::_adaptive_avg_pool2d_backward",
          "aten::_adaptive_avg_pool3d_backward", "aten::adaptive_max_pool2d_backward", family=Family.MISC)
def pool_backward(a: Args) -> Estimate:
    """*_pool*_backward(grad_output, self, ...): 1 FLOP per input element (each input gradient gathers or
    receives its window's share); reads dY (and max pooling's int64 indices), writes dX."""
    g, x = a.tensor(0), a.tensor(1, "self")
    idx = next((t for t in a.tensors()[2:] if t.dtype == "int64"), None)
    io = [(g.numel, g.dtype), (idx.numel if idx else 0, "int64"), (x.numel, x.dtype)]
    return estimate(x.numel, io, f"T=({','.join(map(str, x.shape))}),{short_dtype(x.dtype)},bprop")


@register("aten::nll_loss_backward", "aten::nll_loss2d_backward", family=Family.LOSS)
def nll_loss_backward(a: Args) -> Estimate:
    """nll_loss_backward(grad_output, self, target, ...): 1 FLOP per target; reads the targets, writes dX
    (its zero-fill is the first kernel of the call)."""
    x, t = a.tensor(1, "self"), a.tensor(2, "target")
    return estimate(t.numel, [(t.numel, t.dtype), (x.numel, x.dtype)],
                    f"T=({','.join(map(str, x.shape))}),{short_dtype(x.dtype)},bprop")


@register("aten::embedding_backward", "aten::embedding_dense_backward", family=Family.MISC)
def embedding_backward(a: Args) -> Estimate:
    """embedding_(dense_)backward(grad_output, indices, num_weights, ...): accumulates n·D gradient elements into a
    dense [num_weights, D] gradient (1 FLOP each); reads dY and the indices, writes the weight gradient."""
    g, idx = a.tensor(0), a.tensor(1, "indices")
    v = a.value(2, "num_weights", None)
    if not g.shape or v is None:
        raise NotModelled("num_weights missing")
    d = g.shape[-1]
    n = idx.numel * d
    return estimate(n, [(n, g.dtype), (idx.numel, idx.dtype), (int(v) * d, g.dtype)],
                    f"I=({','.join(map(str, idx.shape))}),V={v},D={d},{short_dtype(g.dtype)},bprop")


@register("aten::_amp_foreach_non_finite_check_and_unscale", family=Family.OPTIM)
def amp_unscale(a: Args) -> Estimate:
    """_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale): 2 FLOPs per element (check,
    multiply); reads and writes every gradient."""
    lists = a.lists()
    if not lists or not lists[0]:
        raise NotModelled("tensor list without its tensors (not recorded by the trace)")
    n = sum(t.numel for t in lists[0])
    return estimate(2 * n, [(t.numel, t.dtype) for t in lists[0]] * 2,
                    f"tensors={len(lists[0])},N={n},{short_dtype(lists[0][0].dtype)}")


@register("aten::_amp_update_scale", family=Family.OPTIM)
def amp_update_scale(a: Args) -> Estimate:
    """_amp_update_scale_(scale, growth_tracker, found_inf, ...): a one-thread kernel: 2 FLOPs, 3 scalars read
    and 2 written."""
    s, g, f = a.tensor(0), a.tensor(1), a.tensor(2)
    return estimate(2, [(1, s.dtype), (1, g.dtype), (1, f.dtype), (1, s.dtype), (1, g.dtype)], "scalar")


@register("aten::new_zeros", "aten::new_ones", "aten::new_full", "torch.Tensor.new_zeros", "torch.Tensor.new_ones",
          "torch.Tensor.new_full", family=Family.MISC)
def new_fill(a: Args) -> Estimate:
    """new_zeros/new_ones/new_full(self, size, ...): writes prod(size) elements of self's dtype (or ``dtype``)."""
    x = a.tensor(0)
    size = a.value(1, "size", None)
    if not isinstance(size, (list, tuple)):
        raise NotModelled("size missing")
    dtype = a.value(None, "dtype", None) or x.dtype
    return estimate(0, [(prod(size), dtype)], f"T=({','.join(map(str, size))}),{short_dtype(dtype)}")


@register("aten::reshape", "torch.reshape", "torch.Tensor.reshape", "aten::flatten", "torch.flatten",
          "torch.Tensor.flatten", "aten::view", "torch.Tensor.view", "aten::unbind", "torch.unbind",
          "torch.Tensor.unbind", "aten::permute", "torch.permute", "torch.Tensor.permute", family=Family.MEMORY)
def reshape(a: Args) -> Estimate:
    """reshape/flatten(self, ...): a view unless the input is not contiguous; view/unbind/permute(self, ...): a view.
    A kernel under one is a copy of every element: reshape's own, or the backward's (unbind's stacks the gradients
    into one tensor, view's copies a gradient that is not contiguous): read and write every element."""
    x = a.tensor(0)
    return estimate(0, [(x.numel, x.dtype)] * 2, f"T=({','.join(map(str, x.shape))}),{short_dtype(x.dtype)}")
