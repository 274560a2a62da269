"""The keys two runs are matched by, made to survive a change of profiler and small code changes.

prof's own keys (pyprof.prof.table.groups) name an op as its capture named it: a ``pyprof.init()`` capture by the
Python call (``__add__``, ``cross_entropy``, ``relu`` with ``inplace=True``, ``float``), a PyTorch-profiler trace
by the aten op under it (``add``, ``cross_entropy_loss``, ``relu_``, ``to``). ``op_name`` maps both to one name,
the Python-level one; a kernel's full name is written differently by Nsight Systems and by the PyTorch profiler
(``<unnamed>`` / ``(anonymous namespace)``, ``(int)8`` / ``8``, ``[lambda() (instance 1)]`` / ``{lambda()#1}``,
a parameter list cut short by nsys): ``kernel_name`` keeps what both agree on, the name and its template
arguments; ``shapes_name`` keeps the shapes of an op's input tensors. A line is matched by file name and line
number (not the path: the two runs may come from two checkouts).
"""
from __future__ import annotations

import ast
import os
import re

from pyprof.common import BoundedDict

#: Suffixes prof's op key adds (pyprof.prof.table.groups.op_key): the direction is kept apart, the name matched.
_SUFFIXES = (" (bprop)", " (recompute)")

#: Python operator methods (what pyprof markers name) -> the aten op they dispatch to (what the PyTorch profiler
#: names). The reflected (``__radd__``) and in-place (``__iadd__``) forms are folded by ``op_name`` itself.
_DUNDER = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "div": "div", "floordiv": "floor_divide",
           "mod": "remainder", "pow": "pow", "matmul": "matmul", "neg": "neg", "abs": "abs", "and": "bitwise_and",
           "or": "bitwise_or", "xor": "bitwise_xor", "invert": "bitwise_not", "lshift": "bitwise_left_shift",
           "rshift": "bitwise_right_shift", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
           "getitem": "index", "setitem": "index_put"}

#: Names that differ between a Python call and the aten op the PyTorch profiler shows for it, aten -> Python.
#: Measured on the pairs of tests/data (nsys/pyprof vs kineto, the same examples): cross_entropy; the
#: dtype conversions are ``Tensor.float()`` and the like, which dispatch to aten::to.
_ALIASES = {"cross_entropy_loss": "cross_entropy", "nll_loss_nd": "nll_loss", "rsub": "sub",
            "float": "to", "double": "to", "half": "to", "bfloat16": "to", "int": "to", "long": "to", "bool": "to",
            "type": "to", "cuda": "to", "cpu": "to"}

_op_cache = BoundedDict(100_000)


def op_name(key: str) -> str:
    """One name for an op however its capture named it, direction suffix kept: ``__iadd__`` -> ``add``,
    ``cross_entropy_loss (bprop)`` -> ``cross_entropy (bprop)``, ``relu_`` -> ``relu``. The in-place and
    out-of-place forms of an op are one op here (``relu(x, inplace=True)`` is ``relu`` to pyprof and ``relu_`` to
    the PyTorch profiler; they run the same kernels)."""
    hit = _op_cache.get(key)
    if hit is None:
        hit = _op_name(key)
        _op_cache.add(key, hit)
    return hit


def _op_name(key: str) -> str:
    suffix = ""
    for s in _SUFFIXES:
        if key.endswith(s):
            key, suffix = key[: -len(s)], s
            break
    name = key
    core = name[2:-2] if len(name) > 4 and name.startswith("__") and name.endswith("__") else None
    if core in _DUNDER:  # before the prefixes: __rshift__ is a shift, __invert__ no in-place "nvert"
        name = _DUNDER[core]
    elif core and core[0] in "ri" and core[1:] in _DUNDER:  # reflected (__radd__), in place (__iadd__)
        name = _DUNDER[core[1:]]
    elif name.endswith("_") and not name.endswith("__") and len(name) > 1:
        name = name[:-1]  # in place: add_, relu_, _foreach_mul_
    name = _ALIASES.get(name, name)
    return name + suffix


_shapes_cache = BoundedDict(100_000)


def shapes_name(shapes: str) -> str:
    """An op's input shapes (pyprof.prof.table.groups.shapes_key) as both kinds of capture write them: the tensors'
    shapes, sorted, ``[[4088], [4088, 32000]]``. The PyTorch profiler adds an empty entry per non-tensor argument
    and writes a tensor list's shapes as ``[]``: non-tensor arguments, tensor lists and 0-d tensors are left out
    of both. Sorted, since it lists the aten op's arguments and pyprof the Python call's, in another order
    (``embedding(input, weight)`` runs ``aten::embedding(weight, indices)``)."""
    hit = _shapes_cache.get(shapes)
    if hit is None:
        try:
            entries = ast.literal_eval(shapes)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            entries = None
        if isinstance(entries, list):
            hit = str(sorted(e for e in entries if isinstance(e, list) and e and all(type(x) is int for x in e)))
        else:
            hit = shapes
        _shapes_cache.add(shapes, hit)
    return hit


def line_name(callsite: str) -> str:
    """A call site (``/abs/path/train.py:42``) as ``train.py:42``; ``-`` (none recorded) stays ``-``."""
    if callsite == "-":
        return callsite
    path, sep, line = callsite.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if sep and line.isdigit() else os.path.basename(callsite)


# ---- kernels

# Applied in order to a full (demangled) kernel name. Each rewrites one way the two demanglers differ into the
# form the other writes, or drops what only one writes.
_KERNEL_REWRITES = [
    (re.compile(r"\[lambda\(([^()]*)\) \(instance (\d+)\)\]"), r"{lambda(\1)#\2}"),  # nsys -> the Itanium form
    (re.compile(r"\(anonymous namespace\)::|<unnamed>::"), ""),
    (re.compile(r"\(bool\)1\b"), "true"),
    (re.compile(r"\(bool\)0\b"), "false"),
    (re.compile(r"\((?:unsigned |signed )?(?:char|short|int|long|long long)\)(-?\d)"), r"\1"),  # (int)8 -> 8
    (re.compile(r"\(unsigned\)(-?\d)"), r"\1"),
    (re.compile(r"\b(\d+)(?:ull|ul|ll|lu|u|l)\b", re.I), r"\1"),  # 3ul -> 3
    (re.compile(r"\bconst\b|\bvoid\b"), ""),  # const moves (const T & vs T const&); a leading void
    (re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*::)+(?=[A-Za-z_~])"), ""),  # namespaces and classes: at::native::
    (re.compile(r"\s+"), " "),
    (re.compile(r" ?([^\w ]) ?"), r"\1"),  # spaces only between two words: char *, > > and char*, >>
]
_kernel_cache = BoundedDict(100_000)


def kernel_name(full: str, short: str | None = None) -> str:
    """A kernel's name and template arguments, without namespaces and parameter list, written the same by
    every demangler pyprof reads: ``multi_tensor_apply_kernel<TensorListMetadata<1>,BinaryOpScalarFunctor<
    BFloat16,1,1,0>,multiplies<float>,float>``. Kernels that share a short name but run different code (the
    functors of ``multi_tensor_apply_kernel``) stay apart; the parameter list adds nothing the template
    arguments do not say, and nsys cuts it short."""
    hit = _kernel_cache.get(full)
    if hit is None:
        hit = _kernel_name(full, short)
        _kernel_cache.add(full, hit)
    return hit


def _kernel_name(full: str, short: str | None) -> str:
    s = full
    for pattern, repl in _KERNEL_REWRITES:
        s = pattern.sub(repl, s)
    at = s.find(short) if short else -1
    if at > 0:
        s = s[at:]
    # The template arguments end where the angle brackets opened after the name close; the parameter list
    # (or, without templates, the first parenthesis) is dropped.
    lt, paren = s.find("<"), s.find("(")
    if lt < 0 or 0 <= paren < lt:
        return s[:paren] if paren > 0 else s
    depth = 0
    for i in range(lt, len(s)):
        c = s[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                s = s[: i + 1]
                break
    # Parameter lists inside the template arguments (a functor's enclosing function, a lambda's) are written
    # with the template's own parameters by nsys (T1, T1 &) and with the types by the PyTorch profiler: dropped,
    # with the casts of enum arguments, which both write alike.
    while True:
        cut = _PARENS.sub("", s)
        if cut == s:
            return s
        s = cut


_PARENS = re.compile(r"\([^()]*\)")
