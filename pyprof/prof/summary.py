"""Summaries: kernels grouped by op, layer, kernel, call site or direction, with count, total and % of GPU
time, FLOPs, TFLOP/s, roofline % (time at peak over measured time, summed over the group's kernels) and the
share of the group's time spent in Tensor Core kernels; sorted by time, optionally the top N.

Kernels group by their full (demangled) name: two kernels that share a short name (cutlass ``Kernel2<...>``,
``elementwise_kernel<...>``) are different code, so two rows; ``kernel_labels`` names each row.
"""
from __future__ import annotations

import re
from typing import IO, Iterable

from pyprof.common import UsageError
from pyprof.prof.modeller import Modeller
from pyprof.prof.formats import FORMATS
from pyprof.prof.coverage import Coverage
from pyprof.prof.rows import rows
from pyprof.prof.roofline import Peaks
from pyprof.prof.totals import Totals

def _op_key(d: dict) -> str:
    # A backward kernel is charged to the forward op it belongs to, with its direction: "linear (bprop)"
    # says more than the aten op inside the autograd node ("mm").
    if d.get("kind", "kernel") != "kernel":
        return d.get("kind") or "na"
    op = (d.get("op") or ("na",))[0]
    if d.get("dir") == "bprop":
        fwd = d.get("fwd")
        # Backward work without a forward link (AccumulateGrad, a node whose forward op is not in the capture)
        # stays apart from the forward op of the same name.
        return f"{fwd['op'] if fwd and fwd.get('op') else op} (bprop)"
    if d.get("recompute"):  # a forward op run again during backward (activation checkpointing)
        return f"{op} (recompute)"
    return op


def _callsite_key(d: dict) -> str:
    # Backward kernels run on the autograd thread, far from any user line: their line is the forward call's.
    fwd = d.get("fwd")
    return d.get("callsite") or (fwd.get("callsite") if fwd else None) or "-"


def layer_path(d: dict) -> list:
    """The record's layer path (outermost first); a backward kernel's is its forward op's."""
    layer = d.get("layer")
    if not layer and d.get("fwd"):
        layer = d["fwd"].get("layer")
    return layer or []


def _layer_key(d: dict) -> str:
    return ":".join(layer_path(d)) or "-"


def kernel_key(d: dict) -> str:
    """A kernel's group: its full name (the short one when the record has no other)."""
    return d.get("kLongName") or d.get("kShortName") or "na"


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_NOISE = frozenset({"void", "const", "int", "unsigned", "long", "bool", "char", "float", "double", "anonymous",
                    "namespace", "at", "native", "std", "c10", "true", "false", "lambda", "operator", "type",
                    "enable_if", "cutlass", "cute", "detail"})


def kernel_labels(names: dict) -> dict:
    """A label per kernel for tables: ``names`` maps a full name to its short name. The label is the short
    name when no other kernel has it; otherwise the short name and, in brackets, the first word of the
    full name's template arguments and parameters that no other kernel of that short name has
    (``elementwise_kernel<direct_copy_kernel_cuda>``), or its rank among them (``Kernel2<#2>``)."""
    by_short: dict = {}
    for full, short in names.items():
        by_short.setdefault(short or full, []).append(full)
    out: dict = {}
    for short, fulls in by_short.items():
        if len(fulls) == 1:
            out[fulls[0]] = short
            continue
        words = {f: _words(f, short) for f in fulls}
        for rank, f in enumerate(sorted(fulls), 1):
            others = set().union(*(set(words[g]) for g in fulls if g != f))
            tell = next((w for w in words[f] if w not in others and w not in _NOISE), None)
            out[f] = f"{short}<{tell if tell is not None else '#' + str(rank)}>"
    return out


def _words(full: str, short: str) -> list[str]:
    """The words of a full kernel name after its short name (its template arguments and parameters)."""
    at = full.find(short)
    return _TOKEN.findall(full[at + len(short):] if at >= 0 else full)


GROUP_KEYS = {
    "op": _op_key,
    "layer": _layer_key,
    "kernel": kernel_key,
    "callsite": _callsite_key,
    "dir": lambda d: d.get("dir") or "na",
}
SUMMARY_COLUMNS = ["key", "count", "time_ns", "time_pct", "flops", "tflops", "roofline", "tc_pct"]
SUMMARY_HEADERS = ["Key", "Count", "Time(ns)", "Time%", "FLOPs", "TFLOP/s", "Roofline%", "TC%"]


def summarize(records: Iterable[tuple[int, dict]], out: IO[str], group_by: str, fmt: str = "space",
              width: int = 0, top: int | None = None, peaks: Peaks | None = None, path: str = "<input>") -> Coverage:
    """Write the grouped summary table; return the coverage. A group none of whose kernels has a roofline
    (nothing modelled, or no peak known for its GPU) shows ``na`` as its Roofline%."""
    if group_by not in GROUP_KEYS:
        raise UsageError(f"--group-by {group_by!r}: choose one of {', '.join(GROUP_KEYS)}")
    keyf = GROUP_KEYS[group_by]
    coverage = Coverage()
    groups: dict = {}
    shorts: dict = {}  # --group-by kernel: full name -> short name
    for _i, d, m, r in rows(records, Modeller(share=True), peaks or Peaks(), True, coverage, path):
        dur = d.get("kDuration") or 0
        g = groups.get(k := keyf(d))
        if g is None:
            g = groups[k] = Totals()
            if group_by == "kernel":
                shorts[k] = d.get("kShortName") or k
        g.kernels += 1
        g.ns += dur
        if m.flops:
            g.flops += m.flops
        if r.roofline_pct is not None:
            g.ideal_ns += r.roofline_pct * dur / 100.0
            g.roof_ns += dur
        if m.tc == "1":
            g.tc_ns += dur
    total = sum(g.ns for g in groups.values()) or 1
    table = sorted(groups.items(), key=lambda kv: -kv[1].ns)
    if top:
        table = table[:top]
    labels = kernel_labels(shorts) if group_by == "kernel" else {}
    cls = FORMATS[fmt]
    w = cls(out, SUMMARY_COLUMNS, SUMMARY_HEADERS, width)
    w.header()
    body = []
    for k, g in table:
        ns = g.ns
        vals = (labels.get(k, k), g.kernels, ns, 100.0 * ns / total, g.flops, g.flops / ns / 1e3 if ns else None,
                100.0 * g.ideal_ns / ns if ns and g.roof_ns else None, 100.0 * g.tc_ns / ns if ns else None)
        if not cls.raw:
            vals = tuple("na" if v is None else (round(v, 3) if isinstance(v, float) else v) for v in vals)
        body.append(vals)
    w.rows(body)
    w.close()
    return coverage
