"""From a marker's module and op name to the registry keys tried for it (in-place, dunder, overload and
method spellings reduced to the function's name; docs/formulas.md, "Lookup")."""
from __future__ import annotations

import re

from pyprof.record import COMPILED_MOD, FUSED_PREFIX

_DUNDER = {"radd": "add", "iadd": "add", "rsub": "rsub", "isub": "sub", "rmul": "mul", "imul": "mul",
           "truediv": "div", "rtruediv": "div", "itruediv": "div", "div": "div", "rdiv": "div", "idiv": "div",
           "floordiv": "floor_divide", "rfloordiv": "floor_divide", "ifloordiv": "floor_divide",
           "mod": "remainder", "rmod": "remainder", "imod": "remainder", "pow": "pow", "rpow": "pow",
           "ipow": "pow", "and": "bitwise_and", "iand": "bitwise_and", "rand": "bitwise_and",
           "or": "bitwise_or", "ior": "bitwise_or", "ror": "bitwise_or", "xor": "bitwise_xor",
           "ixor": "bitwise_xor", "rxor": "bitwise_xor", "invert": "bitwise_not", "neg": "neg", "abs": "abs",
           "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift", "imatmul": "matmul"}
#: An autograd node's name (``NllLossBackward0``): the op whose backward it is, in CamelCase.
_NODE = re.compile(r"([A-Z][A-Za-z0-9]*?)Backward\d*\Z")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def candidates(mod: str, op: str) -> list[str]:
    """Registry keys tried, in order, for a marker's module and op name (in-place, dunder, overload and
    method spellings reduced to the function's name)."""
    if mod == COMPILED_MOD and op.startswith(FUSED_PREFIX):
        # A compiled kernel of element-wise ops and reductions (pyprof.nvtx.inductor): one formula for the kernel,
        # whatever it fuses (its marker lists the buffers it moves).
        return ["inductor.fused"]
    out = []
    if "::" in op:
        ns, name = op.split("::", 1)
        name = name.split(".", 1)[0]  # aten::add.Tensor -> add
        out += [op, f"{ns}::{name}"]
        base = name
    else:
        if mod:
            out.append(f"{mod}.{op}")
        base = op
    if base.startswith("__") and base.endswith("__") and len(base) > 4:
        inner = base[2:-2]
        base = _DUNDER.get(inner, inner)
    elif base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    for m in ([mod] if mod and "::" not in op else []) + ["torch", "torch.nn.functional", "torch.Tensor"]:
        out.append(f"{m}.{base}")
    out.append(f"aten::{base}")
    seen = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def node_op(op: str) -> str | None:
    """The aten op an autograd node's name says it differentiates (``NllLossBackward0`` -> ``aten::nll_loss``),
    or None for any other name."""
    m = _NODE.match(op)
    return f"aten::{_CAMEL.sub('_', m.group(1)).lower()}" if m else None
