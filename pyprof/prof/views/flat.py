"""Flat grouped views: operators (by op, or op + input shapes), kernels (by full name) and GPU time per user
source line. Backward kernels are charged to their forward op and line (pyprof.prof.table.groups' keys, the ones of
``pyprof prof --group-by``)."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.table.groups import kernel_labels
from pyprof.prof.tables import Table
from pyprof.prof.user_ranges import USER_RANGE
from pyprof.prof.views.view_registry import view
from pyprof.prof.views.helpers import merged, modelled_cols, ms, pct, short_lines, total

_ROOF_NOTE = ("Roofline % = time the group's FLOPs or bytes (whichever is longer) would take at the GPU's peak, "
              "over its measured time; kernels without modelled numbers add time but no ideal time; na when none "
              "of the group's kernels has one (nothing modelled, or no peak known for the GPU). An op call's "
              "FLOPs and bytes are shared among its kernels by duration (docs/formulas.md).")
_TC_NOTE = ("TC % = share of the group's time in kernels that used Tensor Cores; na when Tensor Cores apply to none "
            "of its activities (copies, pointwise kernels). FLOPs are na when none of the group's are modelled, "
            "TFLOP/s when it has no FLOPs.")


def _op_rows(groups: dict, gpu_ns: int, key_cols) -> list[list]:
    rows = []
    for key, g in sorted(groups.items(), key=lambda kv: -kv[1].ns):
        ns, calls = g.ns, g.calls
        rows.append(key_cols(key) + [calls, g.count, ms(ns), ms(g.host_ns) if g.host_ns else None,
                                     round(ns / calls / 1e3, 3) if calls else None, pct(ns, gpu_ns),
                                     pct(g.comm_ns, ns)] + modelled_cols(g))
    return rows


_HOST_NOTE = ("Host (ms): CPU time of the op calls, each its outermost op's range on its launching thread, once "
              "per call (a backward op's is its autograd node's, on the engine's thread); na where the records "
              "carry none (records written before host_ns existed, legacy dict lines, activities without an op range).")
_OP_COLS = [("calls", "Calls"), ("kernels", "Kernels"), ("device_ms", "Device (ms)"), ("host_ms", "Host (ms)"),
            ("mean_call_us", "Mean/call (us)"), ("time_pct", "Time %"), ("comm_pct", "Comm %"), ("flops", "FLOPs"),
            ("tflops", "TFLOP/s"),
            ("roofline_pct", "Roofline %"), ("tc_pct", "TC %")]
_OP_NOTES = [
    "Device time is GPU time of the kernels (and copies) launched inside the op, backward kernels charged to "
    "their forward op as 'op (bprop)'; nested ops are not separated (self = total for the outermost op).",
    _HOST_NOTE,
    "Calls count op calls (a kernel numbered 0 in its call starts one; each copy or memset is one).",
    "Comm % = share of the op's time in communication kernels (NCCL's and RCCL's, named nccl*; DeepEP's all-to-all).",
    _ROOF_NOTE, _TC_NOTE]

#: An op at least this much of whose time is communication kernels is named as communication in the notes.
COMM_OP_PCT = 50.0


def op_notes(groups: dict) -> list[str]:
    """The notes that read the groups (by op, or op and shapes) themselves: which ops are communication, and that
    ``range:`` names are user ranges. None where the groups hold no such op."""
    notes = []
    comm = sorted((g.ns, k if type(k) is str else k[0]) for k, g in groups.items()
                  if g.ns and 100.0 * g.comm_ns / g.ns >= COMM_OP_PCT)
    if comm:
        names = list(dict.fromkeys(name for _, name in reversed(comm)))
        notes.append(f"Communication, not computation: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} "
                     f"(Comm % >= {COMM_OP_PCT:.0f}: their time is mostly NCCL/RCCL kernels, which include the wait "
                     "for the other ranks).")
    if any((k if type(k) is str else k[0]).startswith(USER_RANGE) for k in groups):
        notes.append(f"'{USER_RANGE}NAME': kernels that no op encloses, named by the innermost user range "
                     "(record_function, NVTX) around their launch; not an op (docs/views.md, User ranges).")
    return notes


@view("operators")
def operators(agg: Aggregate, worker: str | None = None) -> Table:
    """GPU time, calls, FLOPs, TFLOP/s, roofline % and TC share per op, longest first."""
    ws = agg.select(worker)
    cols = [("op", "Op")] + _OP_COLS
    t = Table.of("operators", "Operators", cols,
                 chart={"type": "pie", "label": "op", "values": ["device_ms"]}, notes=list(_OP_NOTES))
    groups = merged(ws, "ops")
    t.rows = _op_rows(groups, total(ws, "gpu_ns"), lambda k: [k])
    t.notes += op_notes(groups)
    return t


@view("operators_shapes")
def operators_shapes(agg: Aggregate, worker: str | None = None) -> Table:
    """As ``operators``, grouped by op and input shapes (a backward kernel takes its forward op's shapes)."""
    ws = agg.select(worker)
    cols = [("op", "Op"), ("shapes", "Input shapes")] + _OP_COLS
    t = Table.of("operators_shapes", "Operators by input shape", cols,
                 chart={"type": "bar", "label": ["op", "shapes"], "values": ["device_ms"]},
                 notes=list(_OP_NOTES) + ["Input shapes: one entry per argument, [] for a non-tensor."])
    groups = merged(ws, "shapes")
    t.rows = _op_rows(groups, total(ws, "gpu_ns"), lambda k: [k[0], k[1]])
    t.notes += op_notes(groups)
    return t


@view("kernels")
def kernels(agg: Aggregate, worker: str | None = None) -> Table:
    """Per kernel (by full name, labelled by pyprof.prof.table.groups.kernel_labels): calls, total/mean/min/max
    time, TC share, roofline %, estimated occupancy."""
    ws = agg.select(worker)
    cols = [("kernel", "Kernel"), ("calls", "Calls"), ("total_ms", "Total (ms)"), ("mean_us", "Mean (us)"),
            ("min_us", "Min (us)"), ("max_us", "Max (us)"), ("time_pct", "Time %"), ("tflops", "TFLOP/s"),
            ("roofline_pct", "Roofline %"), ("tc_pct", "TC %"), ("occupancy_pct", "Est. occupancy %")]
    t = Table.of("kernels", "Kernels", cols,
                 chart={"type": "pie", "label": "kernel", "values": ["total_ms"]})
    groups = merged(ws, "kernel_groups")
    names: dict = {}
    for w in ws:
        names.update(w.kernel_names)
    labels = kernel_labels({full: names.get(full, full) for full in groups})
    kernel_ns = total(ws, "kernel_ns")
    for full, g in sorted(groups.items(), key=lambda kv: -kv[1].ns):
        ns, calls = g.ns, g.count
        t.rows.append([labels[full], calls, ms(ns), round(ns / calls / 1e3, 3), round(g.min_ns / 1e3, 3),
                       round(g.max_ns / 1e3, 3), pct(ns, kernel_ns)] + modelled_cols(g)[1:] +
                      [pct(g.occ_x_ns, g.occ_ns)])
    t.notes += ["Kernels only: memcpy and memset are in the overview. Time % is of all kernel time.",
                "One row per kernel (its full name): kernels that share a short name are told apart by a word of "
                "their template arguments, e.g. elementwise_kernel<direct_copy_kernel_cuda>.",
                _ROOF_NOTE, _TC_NOTE,
                "Est. occupancy %: the PyTorch profiler's own estimate where the trace has it, else see the "
                "overview's note; na where the export lacks registers or shared memory."]
    return t


@view("lines")
def lines(agg: Aggregate, worker: str | None = None) -> Table:
    """GPU time per user source line (forward and backward together), with the line's text where a source root
    holds its file (pyprof.prof.source_lines), longest first."""
    ws = agg.select(worker)
    cols = [("line", "Line"), ("source", "Source"), ("kernels", "Kernels"), ("gpu_ms", "GPU (ms)"),
            ("host_ms", "Host (ms)"), ("fwd_ms", "Forward (ms)"), ("bwd_ms", "Backward (ms)"), ("opt_ms", "Optimizer (ms)"),
            ("time_pct", "Time %"), ("flops", "FLOPs"), ("tflops", "TFLOP/s"), ("roofline_pct", "Roofline %"),
            ("tc_pct", "TC %")]
    t = Table.of("lines", "GPU time per source line", cols,
                 chart={"type": "stacked", "label": "line", "values": ["fwd_ms", "bwd_ms", "opt_ms"], "top": 12})
    gpu_ns = total(ws, "gpu_ns")
    groups = merged(ws, "lines")
    prefix, shown = short_lines(groups)
    for line, g in sorted(groups.items(), key=lambda kv: -kv[1].ns):
        src = agg.source.line(line) if line != "-" else None
        ns = g.ns
        t.rows.append([shown[line], src, g.count, ms(ns), ms(g.host_ns) if g.host_ns else None, ms(g.fwd_ns), ms(g.bwd_ns), ms(g.opt_ns),
                                pct(ns, gpu_ns)] +
                      modelled_cols(g))
    if prefix:
        t.notes.append(f"Lines are relative to {prefix}.")
    t.notes += [
        "Every GPU activity (kernels, copies, memsets) is charged to the user line whose op launched it; a backward "
        "kernel to its forward op's line. '-': no call site recorded (no pyprof marker, or no forward link).",
        "Source: the line's text, read only from Python files under the source roots (--source-root DIR; by "
        "default the current folder): the recorded path when it lies under one, else its trailing folders "
        "looked up under each; na otherwise.", _HOST_NOTE, _ROOF_NOTE, _TC_NOTE]
    unshown = agg.source.note(groups)
    if unshown:
        t.notes.append(unshown)
    return t
