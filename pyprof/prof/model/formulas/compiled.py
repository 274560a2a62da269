"""Kernels that torch.compile's Inductor generated, as pyprof.init() names them (docs/markers.md, "Compiled kernel
ranges").

A kernel that contains a matrix op (an extern ``mm``, a Triton GEMM template with its epilogue) is named by that
op and modelled by its formula. Every other kernel fuses element-wise ops and reductions; its marker lists the
buffers it reads (``in``, made outside the kernel) and writes (``out``, used outside it), and ``elementwise``:
the elements its fused nodes process. Modelling choices (docs/formulas.md, "Compiled kernels"):
- FLOPs = ``elementwise``: one operation per element of each fused node (the larger of its input and output),
  as pyprof counts an element-wise op's elementary operations; Inductor's nodes are those elementary ops.
- Bytes: each ``in`` and ``out`` buffer once, whole. The intermediates of the fusion never reach memory, which
  is the point of fusing, so they are not counted.
"""
from __future__ import annotations

from pyprof.prof.model.args import Args, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


@register("inductor.fused", family=Family.POINTWISE)
def fused(a: Args) -> Estimate:
    """A kernel Inductor generated from element-wise ops and reductions: FLOPs its ``elementwise`` count, bytes the
    elements it reads (``in``) and writes (``out``) of buffers outside it."""
    ins = [e for e in a.entries if e.get("name") == "in" and "shape" in e]
    outs = [e for e in a.entries if e.get("name") == "out" and "shape" in e]
    elements = a.value(None, "elementwise")
    if not outs or not isinstance(elements, int):
        raise NotModelled("the compiled kernel's marker names no output buffer")
    tensors = Args([{k: v for k, v in e.items() if k != "name"} for e in ins + outs]).tensors()
    moved = sum(t.nbytes for t in tensors)
    out = tensors[len(ins)]
    params = f"in={len(ins)},out={len(outs)},elems={out.numel},{short_dtype(out.dtype)}"
    return Estimate(elements, moved, params)
