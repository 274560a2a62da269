"""Element-wise ops: unary, binary, ternary, comparisons, transcendental functions and activations.

Modelling choices (docs/formulas.md):
- FLOPs = (FLOPs per output element) × output elements; the output shape is the broadcast of the tensor
  arguments. Each elementary operation counts 1, a transcendental function (exp, log, tanh, erf ...) too
  (one special-function instruction), so a composite activation costs the sum of its parts (table below).
- Bytes: every tensor argument read once (its own size, before broadcasting), the output written once in
  the first tensor's dtype (type promotion ignored) or bool for comparisons. Python scalars move no bytes.
- Backward (role bprop, e.g. ``GeluBackward0``): the forward's FLOPs; reads the output gradient and every
  input, writes one gradient per tensor input.
The table is expanded into one registration per op by ``_register_table`` (one decorator call per row).
"""
from __future__ import annotations

from math import prod

from pyprof.prof.model.args import Args, broadcast, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register

# op -> FLOPs per output element, with the arithmetic where it is not 1.
UNARY = {
    "abs": 1, "neg": 1, "negative": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "exp": 1, "exp2": 1, "expm1": 1,
    "log": 1, "log2": 1, "log10": 1, "log1p": 1, "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1,
    "sinh": 1, "cosh": 1, "tanh": 1, "asinh": 1, "acosh": 1, "atanh": 1, "erf": 1, "erfc": 1, "erfinv": 1,
    "sign": 1, "sgn": 1, "floor": 1, "ceil": 1, "round": 1, "trunc": 1, "frac": 1, "square": 1,
    "bitwise_not": 1, "logical_not": 1, "nan_to_num": 1, "clamp_min": 1, "clamp_max": 1,
    "clamp": 2, "clip": 2,  # a max and a min
    "sigmoid": 3,  # 1 / (1 + exp(-x)): exp, add, divide
    "relu": 1, "relu6": 2, "hardtanh": 2, "threshold": 1,
    "leaky_relu": 2,  # compare, multiply
    "elu": 3, "celu": 3, "selu": 4,  # exp, subtract, multiply (+ scale for selu)
    "gelu": 5,  # 0.5·x·(1 + erf(x/√2)): divide, erf, add, 2 multiplies
    "silu": 4,  # x·sigmoid(x)
    "mish": 4,  # x·tanh(softplus(x)): exp, log1p, tanh, multiply
    "softplus": 2,  # log1p(exp(x))
    "hardswish": 4, "hardsigmoid": 3, "logsigmoid": 4, "softsign": 3, "tanhshrink": 2, "softshrink": 2,
    "hardshrink": 1,
}
COMPARE = {"eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "greater": 1, "less": 1, "greater_equal": 1,
           "less_equal": 1, "not_equal": 1, "isnan": 1, "isinf": 1, "isfinite": 1, "isneginf": 1,
           "isposinf": 1, "logical_and": 1, "logical_or": 1, "logical_xor": 1, "signbit": 1,
           "isclose": 4}  # |a-b| <= atol + rtol·|b|: subtract, abs, fma, compare
BINARY = {
    "add": 1, "sub": 1, "subtract": 1, "rsub": 1, "mul": 1, "multiply": 1, "div": 1, "divide": 1,
    "true_divide": 1, "floor_divide": 1, "remainder": 1, "fmod": 1, "pow": 1, "float_power": 1, "atan2": 1,
    "maximum": 1, "minimum": 1, "fmax": 1, "fmin": 1, "copysign": 1, "bitwise_and": 1, "bitwise_or": 1,
    "bitwise_xor": 1, "bitwise_left_shift": 1, "bitwise_right_shift": 1,
    "xlogy": 2, "hypot": 4,  # hypot: 2 squares, add, sqrt
    "prelu": 2,  # compare, multiply
}
TERNARY = {
    "addcmul": 3, "addcdiv": 3,  # a + v·(b·c): 2 multiplies, 1 add
    "lerp": 3,  # a + w·(b - a)
    "where": 1,
}
_FUNCTIONAL = {"relu", "relu6", "hardtanh", "threshold", "leaky_relu", "elu", "celu", "selu", "gelu", "silu",
               "mish", "softplus", "hardswish", "hardsigmoid", "logsigmoid", "softsign", "tanhshrink",
               "softshrink", "hardshrink", "sigmoid", "tanh", "prelu"}


def elementwise(a: Args, flops_per_element: int, out_dtype: str | None = None, name: str = "") -> Estimate:
    """The shared pointwise estimate (see the module docstring); ``out_dtype`` None means the first tensor's."""
    ts = a.tensors()
    if not ts:
        raise NotModelled("no tensor argument")
    if name == "where":  # where(cond, x, y): output in x's dtype
        dtype = next((t.dtype for t in ts[1:] if t.dtype), ts[0].dtype) if len(ts) > 1 else ts[0].dtype
    else:
        dtype = ts[0].dtype
    dtype = out_dtype or dtype
    shape = broadcast(*(t.shape for t in ts))
    n = prod(shape)
    params = "T=" + ",".join("(" + ",".join(map(str, t.shape)) + ")" for t in ts) + "," + short_dtype(ts[0].dtype)
    io = [(t.numel, t.dtype) for t in ts] + [(n, dtype)]
    if a.role != "fprop":  # read dOut and the inputs, write one gradient per input
        io = [(n, dtype)] + [(t.numel, t.dtype) for t in ts] * 2
        params += ",bprop"
    return estimate(flops_per_element * n, io, params)


def _make(name: str, cost: int, out_dtype: str | None):
    def formula(a: Args) -> Estimate:
        return elementwise(a, cost, out_dtype, name)

    formula.__name__ = formula.__qualname__ = f"pointwise_{name}"
    formula.__doc__ = f"{name}: {cost} FLOP(s) per output element" + (", bool output" if out_dtype else "") + "."
    return formula


def _register_table(table: dict, out_dtype: str | None = None) -> None:
    for name, cost in table.items():
        names = [f"torch.{name}", f"aten::{name}"]
        if name in _FUNCTIONAL:
            names.append(f"torch.nn.functional.{name}")
        register(*names, family=Family.POINTWISE)(_make(name, cost, out_dtype))


_register_table(UNARY)
_register_table(BINARY)
_register_table(TERNARY)
_register_table(COMPARE, "bool")


@register("torch.nn.functional.glu", "aten::glu", family=Family.POINTWISE)
def glu(a: Args) -> Estimate:
    """glu(x, dim=-1) = a·sigmoid(b) on the two halves: 4 FLOPs per output element (half the input)."""
    x = a.tensor(0)
    n = x.numel // 2
    io = [(x.numel, x.dtype), (n, x.dtype)] if a.role == "fprop" else [(n, x.dtype), (x.numel, x.dtype)] * 2
    return estimate(4 * n, io, f"T=({','.join(map(str, x.shape))}),{short_dtype(x.dtype)}")


# An outer product runs as a broadcast multiply (one element-wise kernel), not in a matrix library: a matrix
# family would make that kernel a helper and lose its FLOPs (registry.Family).
@register("torch.outer", "torch.ger", "torch.Tensor.outer", "torch.Tensor.ger", "aten::outer", "aten::ger",
          family=Family.POINTWISE)
def outer(a: Args) -> Estimate:
    """outer(x[M], y[N]) = x_i·y_j: M·N multiplies; reads x and y, writes the M×N product. Backward (bprop):
    dx = dY·y and dy = dYᵀ·x, M·N multiply-adds each (4·M·N); reads dY, x and y, writes dx and dy."""
    x, y = a.tensor(0), a.tensor(1)
    m, n = x.numel, y.numel
    p = f"x=({m}),y=({n}),{short_dtype(x.dtype)}"
    if a.role != "fprop":
        return estimate(4 * m * n, [(m * n, x.dtype), (m, x.dtype), (n, y.dtype), (m, x.dtype), (n, y.dtype)],
                        p + ",bprop")
    return estimate(m * n, [(m, x.dtype), (n, y.dtype), (m * n, x.dtype)], p)


@register("torch.nn.functional.dropout", "torch.dropout", "aten::dropout", "aten::native_dropout",
          "aten::_fused_dropout", "aten::feature_dropout", "torch.nn.functional.dropout1d",
          "torch.nn.functional.dropout2d", "torch.nn.functional.dropout3d", "torch.nn.functional.alpha_dropout",
          family=Family.POINTWISE)
def dropout(a: Args) -> Estimate:
    """dropout(x, p, training): forward 2 FLOPs per element (compare a random number with p, scale),
    reads x, writes y and a 1-byte mask; backward 1 FLOP (mask·scale), reads dy and the mask, writes dx.
    Random-number generation is not counted as FLOPs."""
    x = a.tensor(0)
    p = f"T=({','.join(map(str, x.shape))}),p={a.value(1, 'p', 0.5)},{short_dtype(x.dtype)}"
    if a.role != "fprop":
        return estimate(x.numel, [(x.numel, x.dtype), (x.numel, "bool"), (x.numel, x.dtype)], p + ",bprop")
    return estimate(2 * x.numel, [(x.numel, x.dtype), (x.numel, x.dtype), (x.numel, "bool")], p)


@register("torch.softmax", "torch.nn.functional.softmax", "aten::softmax", "aten::_softmax",
          "torch.log_softmax", "torch.nn.functional.log_softmax", "aten::log_softmax", "aten::_log_softmax",
          "torch.special.softmax", "torch.special.log_softmax", "aten::_safe_softmax", family=Family.POINTWISE)
def softmax(a: Args) -> Estimate:
    """softmax / log_softmax(x, dim): 5 FLOPs per element forward (max, subtract, exp, sum, divide or log),
    4 backward (y·(dy - sum(y·dy)): multiply, sum, subtract, multiply). Reads x once, writes y once."""
    x = a.tensor(0)
    p = f"T=({','.join(map(str, x.shape))}),dim={a.value(1, 'dim', -1)},{short_dtype(x.dtype)}"
    if a.role != "fprop":
        return estimate(4 * x.numel, [(x.numel, x.dtype)] * 3, p + ",bprop")
    return estimate(5 * x.numel, [(x.numel, x.dtype)] * 2, p)
