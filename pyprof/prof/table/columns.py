"""The output columns: name, header, meaning, and how each is computed from (idx, record, model result,
roofline.Roofline). ``compile_row`` turns a column selection into one function per run, giving a row's values
(a tuple), and ``compile_line`` into one giving a row's line of text for the csv and space formats (formats'
LineFields): the per-row cost is then a single call (bench/prof_speed.py).

Text formats show ``na`` where a value is not known; JSON Lines gives null.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

from pyprof.common import UsageError
from pyprof.prof.model.results import first_name
from pyprof.prof.model.tensorcores import TC_TEXT


class Column(NamedTuple):
    header: str
    meaning: str
    text: str  # expression over i, d, m, r giving the text-format value
    raw: str  # expression giving the JSON value (None for na)


def _seq(v) -> str:
    return ",".join(map(str, v)) if v else "-"


def _dims(v) -> str:
    return "(" + ",".join(map(str, v)) + ")" if v else "na"


def _na(v):
    return "na" if v is None else v


def _f(v, digits: int):
    return "na" if v is None else round(v, digits)


def _own_or_forward(value, fwd, key: str):
    """A record's layer or call site, else its forward op's (a backward kernel runs on the autograd thread,
    outside the user's layers and lines: the forward link says where it belongs; pyprof.prof.table.groups' keys)."""
    if value:
        return value
    return fwd.get(key) if type(fwd) is dict else None


def _last_site(v) -> str:
    return v[-1].rsplit("/", 1)[-1] if v else "-"


COLUMNS: dict[str, Column] = {
    "idx": Column("Idx", "index of the kernel in the input (from 0)", "i", "i"),
    "seq": Column("SeqId", "PyTorch sequence id(s) of the op", "_seq(d.get('seqId'))", "d.get('seqId') or []"),
    "altseq": Column("AltSeqId", "alternative sequence id(s)", "_seq(d.get('altSeqId'))", "d.get('altSeqId') or []"),
    "tid": Column("TId", "CPU thread id that launched the kernel", "_na(d.get('tid'))", "d.get('tid')"),
    "layer": Column("Layer", "user 'layer:' annotations, outermost first, ':'-joined (a backward kernel's: its "
                             "forward op's)",
                    "':'.join(_own_or_forward(d.get('layer'), d.get('fwd'), 'layer') or ()) or '-'",
                    "_own_or_forward(d.get('layer'), d.get('fwd'), 'layer') or []"),
    "trace": Column("Trace", "call stack (file:line), ','-joined", "','.join(d.get('trace') or ()) or '-'",
                    "d.get('trace') or []"),
    "dir": Column("Direction", "fprop or bprop", "d.get('dir') or 'na'", "d.get('dir') or None"),
    "sub": Column("Sub", "index of the kernel among the kernels of its op call", "_na(d.get('subSeqId'))",
                  "d.get('subSeqId')"),
    "mod": Column("Module", "where the op lives (torch.nn.functional, torch.Tensor, aten ...)",
                  "_first(d.get('mod'), 'na')", "_first(d.get('mod'))"),
    "op": Column("Op", "the op (for a backward kernel, the autograd node)", "_first(d.get('op'), 'na')",
                 "_first(d.get('op'))"),
    "kernel": Column("Kernel", "kernel short name", "d.get('kShortName') or 'na'", "d.get('kShortName')"),
    "params": Column("Params", "the op's shapes and dtype as the formula saw them (dgrad/wgrad for backward)",
                     "m.params or 'na'", "m.params or None"),
    "sil": Column("Time(ns)", "kernel duration on the GPU, ns (the original PyProf's silicon time, Sil(ns))", "d.get('kDuration', 0)",
                  "d.get('kDuration', 0)"),
    "tc": Column("TC", "Tensor Cores: yes used, no eligible but not used, - not applicable", "TC_TEXT[m.tc]",
                 "TC_TEXT[m.tc]"),
    "device": Column("Device", "GPU index", "_na(d.get('device'))", "d.get('device')"),
    "stream": Column("Stream", "CUDA stream id", "_na(d.get('stream'))", "d.get('stream')"),
    "grid": Column("Grid", "grid dimensions", "_dims(d.get('grid'))", "d.get('grid') or None"),
    "block": Column("Block", "block dimensions", "_dims(d.get('block'))", "d.get('block') or None"),
    "flops": Column("FLOPs", "floating-point operations (an FMA is 2)", "_na(m.flops)", "m.flops"),
    "bytes": Column("Bytes", "bytes read and written in device memory (each input once, each output once)",
                    "_na(m.bytes)", "m.bytes"),
    "start": Column("Start(ns)", "kernel start time, ns", "_na(d.get('start_ns'))", "d.get('start_ns')"),
    "callsite": Column("CallSite", "the user's file:line that called the op (a backward kernel's: its forward "
                                   "op's)",
                       "_own_or_forward(d.get('callsite'), d.get('fwd'), 'callsite') or '-'",
                       "_own_or_forward(d.get('callsite'), d.get('fwd'), 'callsite')"),
    "tflops": Column("TFLOP/s", "achieved TFLOP/s (FLOPs / duration)", "_f(r.tflops, 3)", "r.tflops"),
    "gbps": Column("GB/s", "achieved GB/s (bytes / duration)", "_f(r.gbps, 1)", "r.gbps"),
    "intensity": Column("FLOP/B", "arithmetic intensity, FLOPs per byte", "_f(r.flops_per_byte, 2)", "r.flops_per_byte"),
    "roofline": Column("Roofline%", "% of the roofline: max(FLOPs/peak FLOP/s, bytes/peak bandwidth) / duration",
                       "_f(r.roofline_pct, 1)", "r.roofline_pct"),
    "note": Column("Note", "why flops/bytes are na, or why a kernel is above its roofline", "_note(m, r) or '-'",
                   "_note(m, r)"),
}
#: The original's default, then what the tool is for (Tensor Cores, FLOPs, TFLOP/s, roofline): added at the end,
#: so that an awk script reading the original's eight fields by position reads the same ones.
DEFAULT = ["idx", "dir", "sub", "mod", "op", "kernel", "params", "sil", "tc", "flops", "tflops", "roofline"]
ROOFLINE_COLUMNS = frozenset({"tflops", "gbps", "intensity", "roofline", "note"})


def parse_columns(spec: str) -> list[str]:
    """Column names from ``-c`` (comma separated; ``all`` for every column). Raises UsageError on an unknown one."""
    cols = list(COLUMNS) if spec.strip() == "all" else [c.strip() for c in spec.split(",") if c.strip()]
    bad = [c for c in cols if c not in COLUMNS]
    if bad or not cols:
        raise UsageError(f"unknown column(s) {','.join(bad) or '(none)'}; valid: {','.join(COLUMNS)}")
    return cols


def help_text() -> str:
    """One line per column: name and meaning (for ``-h``)."""
    return "\n".join(f"{name:<10} {c.meaning}" for name, c in COLUMNS.items())


#: The helpers a column's whole expression may be a call of, written out inline by ``compile_row`` and
#: ``compile_line``: the same value without a Python function call per row. The argument is a record field or
#: a result's attribute, never a call with commas inside.
_INLINE = [
    (re.compile(r"_na\(([\w.]+(?:\('\w+'\))?)\)"), "('na' if ({v} := {0}) is None else {v})"),
    (re.compile(r"_f\(([\w.]+(?:\('\w+'\))?), (\d+)\)"), "('na' if ({v} := {0}) is None else round({v}, {1}))"),
    # results.first_name: a string is the name itself (or the default when empty), a list its first item
    (re.compile(r"_first\((d\.get\('\w+'\))(?:, ('\w+'))?\)"),
     "(({v} or {1}) if type({v} := {0}) is str else {v}[0] if {v} else {1})"),
]


def _inline(expr: str, k: int) -> str:
    """``expr`` with a call of one of _INLINE's helpers that is the whole of it written out inline."""
    for pattern, template in _INLINE:
        m = pattern.fullmatch(expr)
        if m is not None:
            args = [a if a is not None else "None" for a in m.groups()]
            return "(" + template.format(*args, v=f"_v{k}") + ")"
    return expr


ABOVE_ROOFLINE = ("above its roofline: faster than the modelled FLOPs and bytes allow at the GPU's peaks, so "
                  "it did less than modelled (data read from L2 cache rather than memory, a Winograd or FFT "
                  "convolution's fewer multiplications) or its time is rounded (traces in whole microseconds)")


def _note(m, r) -> str | None:
    """Why a row's numbers are na, or why it is above its roofline (a number no GPU reaches needs its reason)."""
    if m.reason:
        return m.reason
    return ABOVE_ROOFLINE if r.roofline_pct is not None and r.roofline_pct > 100.0 else None


_ENV = {"_seq": _seq, "_dims": _dims, "_na": _na, "_f": _f, "_last_site": _last_site, "_note": _note,
        "TC_TEXT": TC_TEXT, "_own_or_forward": _own_or_forward, "_first": first_name}


_GET = re.compile(r"d\.get\('(\w+)'")


def record_keys(cols: list[str]) -> set[str]:
    """The record keys the columns' expressions read (for reader.lean_loads)."""
    keys: set = set()
    for c in cols:
        col = COLUMNS[c]
        keys.update(_GET.findall(col.text + col.raw))  # the columnated trace (_last_site) reads the same key
    return keys


def row_function(cols: list[str], fmt) -> tuple[Callable, bool]:
    """The per-kernel table's function (i, d, m, r) -> row for these columns in format class ``fmt``, and
    whether it makes lines (``fmt.lines``; compile_line) rather than tuples (``fmt.rows``; compile_row).

    Lines where the format has LineFields and there are two columns or more: the csv module writes a row of
    one empty field as ``""``, a field of its own kind."""
    if fmt.fields is not None and len(cols) > 1:
        return compile_line(cols, fmt.fields()), True
    return compile_row(cols, raw=fmt.raw, short_trace=fmt.name.startswith("columns")), False


#: The type of a number column's text value where it has one (where not, the string 'na', or None): the type
#: compile_line tests first. The others are text columns, whose values are strings.
NUMBER_TYPES: dict[str, type] = {**dict.fromkeys(("idx", "tid", "sub", "sil", "device", "stream", "flops", "bytes",
                                                  "start"), int),
                                 **dict.fromkeys(("tflops", "gbps", "intensity", "roofline"), float)}
_ROUNDED = re.compile(r"_f\((.+), (\d+)\)")
_FIXED = ["%%.%df" % n for n in range(5)]


def round_text(v: float, digits: int) -> str:
    """``str(round(v, digits))`` for a float ``v`` (the text a line format writes for it), in one formatting
    instead of two. ``'%.Nf'`` rounds the exact binary value to N decimals as ``round`` does (both are
    CPython's dtoa in the same mode), and the decimal it gives, less its trailing zeros, is the shortest
    text of the double ``round`` returns, which ``str`` writes: a decimal of at most 15 significant digits
    (DBL_DIG) is the only one of its length that reads back as that double. Hence the bounds: 1 to 4
    decimals and under 1e9 in size (at most 13 digits, and ``str`` writes no exponent from 1e-4 to 1e16);
    elsewhere (nan, inf) ``round``."""
    if -1e9 < v < 1e9 and 0 < digits <= 4:
        t = (_FIXED[digits] % v).rstrip("0")
        return t + "0" if t[-1] == "." else t
    return str(round(v, digits))


def compile_line(cols: list[str], fields) -> Callable:
    """One function (i, d, m, r) -> the row's line of text: the selected columns' text values, each written as
    ``fields`` (formats.LineFields) writes it, joined by its separator. An int or a float goes in as its
    ``str`` (its text in every such format: the csv module writes a float's ``repr``, which is its ``str``), a
    string through the cache of texts, anything else (None) through ``fields.text``."""
    parts = []
    for k, c in enumerate(cols):
        e = _inline(COLUMNS[c].text, k)
        assert '"' not in e and "\\" not in e and "{" not in e  # it goes inside an f-string of this module
        w, kind = f"_w{k}", NUMBER_TYPES.get(c)
        rounded = _ROUNDED.fullmatch(COLUMNS[c].text) if kind is float else None
        if rounded is not None:  # a float rounded for the table: its text at once (round_text), 'na' for None
            x, n = rounded.groups()
            p = f"_na_text if ({w} := {x}) is None else round_text({w}, {n}) if {w}.__class__ is float else " \
                f"_text(round({w}, {n}))"
        elif kind is not None:
            p = f"{w} if (_c{k} := ({w} := {e}).__class__) is int or _c{k} is float else " \
                f"(_get({w}) or _text({w})) if _c{k} is str else _text({w})"
        else:
            p = f"(_get({w}) or _text({w})) if ({w} := {e}).__class__ is str else _text({w})"
        parts.append("{(" + p + ")}")
    src = 'lambda i, d, m, r: f"' + fields.separator.join(parts) + '"'
    return eval(src, dict(_ENV, _get=fields.get, _text=fields.text, _na_text=fields.text("na"),  # noqa: S307
                          round_text=round_text))


def compile_row(cols: list[str], raw: bool = False, short_trace: bool = False) -> Callable:
    """One function (i, d, m, r) -> tuple of the selected columns' values (text form unless ``raw``)."""
    exprs = []
    for c in cols:
        col = COLUMNS[c]
        e = col.raw if raw else col.text
        if c == "trace" and short_trace and not raw:  # columnated output: the innermost site only, as the original
            e = "_last_site(d.get('trace'))"
        exprs.append(e)
    # Generated from the fixed expressions above (never from input data): one call per row.
    exprs = [_inline(e, k) for k, e in enumerate(exprs)]
    src = "lambda i, d, m, r: (" + "".join(f"{e}, " for e in exprs) + ")"
    return eval(src, dict(_ENV))  # noqa: S307
