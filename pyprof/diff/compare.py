"""The diff of two runs as Tables (pyprof.prof.tables), which the terminal, CSV, JSON Lines and the HTML page
render as they render the views: the runs compared, the mean step's change split into kernel, copy and idle
time, GPU time and calls per step by op (or op and shapes, line, kernel) with the change, and the kernels that
ran in one run only.

Every time and count is per step of its run (pyprof.diff.runs), so runs of different lengths compare. Columns
that hold a run's number start ``base_`` or ``new_``, the change ``delta_`` (new - base), so a script finds
them by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pyprof.diff.keys import kernel_name, line_name, op_name, shapes_name
from pyprof.diff.runs import OPTIMIZER, WHOLE, Run
from pyprof.prof.aggregate import WorkerData
from pyprof.prof.tables import Table

#: --by: what rows are keyed by.
BY = ("op", "shape", "line", "kernel")


@dataclass
class Sums:
    """What one key adds up to in one run, over its workers."""

    ns: int = 0
    calls: int = 0
    names: set = field(default_factory=set)  # the keys as the run's capture named them


def _keyed(w: WorkerData, by: str) -> list[tuple[str | tuple, str, object]]:
    """(matching key, the run's own name for it, Group) for each group of the worker."""
    if by == "op":
        return [(op_name(k), k, g) for k, g in w.ops.items()]
    if by == "shape":
        return [((op_name(k[0]), shapes_name(k[1])), k, g) for k, g in w.shapes.items()]
    if by == "line":
        return [(line_name(k), k, g) for k, g in w.lines.items()]
    return [(kernel_name(full, w.kernel_names.get(full)), full, g) for full, g in w.kernel_groups.items()]


def sums(run: Run, by: str) -> dict:
    """Per matching key, the run's Sums. ``calls`` are op calls by op and by shape, activities (kernels,
    copies, memsets) by line and kernel launches by kernel: what prof's groups count for each key."""
    out: dict = {}
    for w in run.workers:
        for key, own, g in _keyed(w, by):
            s = out.get(key)
            if s is None:
                s = out[key] = Sums()
            s.ns += g.ns
            s.calls += g.calls if by in ("op", "shape") else g.count
            s.names.add(own)
    return out


# + 0.0: a change that rounds to nothing reads 0.0, not -0.0
def _ms(ns: float) -> float:
    return round(ns / 1e6, 4) + 0.0


def _pct(delta: float, base: float) -> float | None:
    return round(100.0 * delta / base, 2) + 0.0 if base else None


def _calls(n: float) -> float:
    return round(n, 3) + 0.0


def _shown(key, names: set, by: str) -> list:
    """The row's key columns: the runs' own name where they agree on one (``_foreach_mul_``), else the
    matching name (``cross_entropy`` for ``cross_entropy`` and ``cross_entropy_loss``)."""
    if by == "shape":
        ops, shapes = {n[0] for n in names}, {n[1] for n in names}
        return [next(iter(ops)) if len(ops) == 1 else key[0], next(iter(shapes)) if len(shapes) == 1 else key[1]]
    if by in ("line", "kernel") or len(names) != 1:
        return [key]
    return [next(iter(names))]


def _in_both(mine: dict, other: dict | None) -> int:
    """The time of ``mine``'s keys that ``other`` has too (all of them for None)."""
    return sum(s.ns for k, s in mine.items() if other is None or k in other)


@dataclass
class Diff:
    """The diff's tables and the figures a caller acts on."""

    tables: list[Table]
    base_step_ns: float | None  # mean step span; None when a run has no timed activity
    new_step_ns: float | None
    matched_pct: float | None  # share of both runs' time per step in rows found in both
    # why the mean steps do not compare ("cannot compare the mean step: ..."), None when they do
    not_per_step: str | None = None
    gpus: tuple[list[str], list[str]] | None = None  # (base's, new's) GPU names, when both are known and differ


def compare(base: Run, new: Run, by: str = "op", top: int | None = None) -> Diff:
    """The diff of ``new`` against ``base``, rows keyed ``by`` one of BY; ``top`` keeps the N rows that changed
    most (and N kernels of one run only). Raises ValueError for an unknown ``by``."""
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, not {by!r}")
    b, n = sums(base, by), sums(new, by)
    rows_table, matched = _rows(base, new, b, n, by, top)
    kb, kn = (b, n) if by == "kernel" else (sums(base, "kernel"), sums(new, "kernel"))
    timed = base.timed and new.timed
    step_b = base.times.span_ns / base.steps if timed else None
    step_n = new.times.span_ns / new.steps if timed else None
    gpus = _gpus(base, new)
    not_per_step = _not_per_step(base, new) if timed else None
    tables = [_runs(base, new, b, n), _steps(base, new, timed, not_per_step, gpus), rows_table,
              _only(base, new, kb, kn, top)]
    return Diff(tables, step_b, step_n, matched, not_per_step, gpus)


def _gpus(base: Run, new: Run) -> tuple[list[str], list[str]] | None:
    """The runs' GPU names (the records' ``gpu``), when both runs name theirs and they differ; else None."""
    b, n = (sorted({g for w in r.workers for g in w.gpus if g}) for r in (base, new))
    return (b, n) if b and n and b != n else None


def _not_per_step(base: Run, new: Run) -> str | None:
    """Why the two runs' mean steps do not compare, or None: one run's steps are step ranges (ProfilerStep, user
    ranges) and the other's one window over its whole capture (pyprof.diff.runs), which also holds what ran
    before its first step and after its last."""
    windowed = [r for r in (base, new) if set(r.step_sources) <= {WHOLE, OPTIMIZER}]
    if len(windowed) != 1:
        return None
    one = windowed[0]
    other = new if one is base else base
    against = f"against {other.label}'s {other.steps} steps from {', '.join(other.step_sources)}"
    if one.step_sources == [WHOLE]:
        return (f"cannot compare the mean step: {one.label} has no steps (no ProfilerStep or step ranges, at most "
                f"one optimizer step), so its one 'step' is its whole capture, {against}; every figure per step of "
                f"{one.label} is its whole capture's")
    return (f"cannot compare the mean step: {one.label} has no step ranges, so its {one.steps} steps are its "
            f"optimizer steps dividing one window over its whole capture (what ran before its first step and after "
            f"its last included), {against}; its step and idle time per step hold that, its kernel, copy and GPU "
            "time per step only its work")


def _runs(base: Run, new: Run, b: dict, n: dict) -> Table:
    t = Table.of("diff_runs", "Runs compared", [
        ("run", "Run"), ("inputs", "Inputs"), ("workers", "Workers"), ("steps", "Steps"),
        ("step_source", "Steps from"), ("step_ms", "Step (ms)"), ("gpu_ms", "GPU time/step (ms)"),
        ("matched_pct", "Matched %")])
    for run, mine, other in ((base, b, n), (new, n, b)):
        t.rows.append([run.label, ", ".join(run.inputs), len(run.agg.workers), run.steps,
                       ", ".join(run.step_sources), _ms(run.times.span_ns / run.steps) if run.timed else None,
                       _ms(run.gpu_ns / run.steps), _pct(_in_both(mine, other), _in_both(mine, None))])
    t.notes += [
        "Every time and count is per step of its run: the run's total over its number of steps (with several "
        "workers, ranks, over the sum of their steps: the mean rank's step). Steps are the overview's "
        "(ProfilerStep#N, else user step ranges); a capture with neither counts its optimizer steps.",
        "Matched % = share of the run's GPU time in the rows below found in both runs (by kernel: of its kernel "
        "time; docs/diff.md says how ops, shapes, lines and kernels are matched across profilers)."]
    if base.step_sources != new.step_sources:
        windows = {WHOLE, OPTIMIZER} & set(base.step_sources + new.step_sources)
        t.notes.append(f"The runs' steps were found differently (base: {', '.join(base.step_sources)}; new: "
                       f"{', '.join(new.step_sources)}): a step's span can hold different things"
                       + (" (a window without step ranges runs from the capture's first GPU activity to its last, "
                          "what ran before the first step and after the last included)." if windows else "."))
    return t


def _steps(base: Run, new: Run, timed: bool, not_per_step: str | None, gpus) -> Table:
    t = Table.of("diff_steps", "Step time change: kernel, copy and idle time", [
        ("part", "Part"), ("base_ms", "Base (ms/step)"), ("new_ms", "New (ms/step)"), ("delta_ms", "Delta (ms)"),
        ("delta_pct", "Delta %")])
    parts: list[tuple[str, Callable[[Run], float]]] = [
        ("step", lambda r: r.times.span_ns), ("kernel", lambda r: r.times.kernel_ns),
        ("copy", lambda r: r.times.memcpy_ns + r.times.memset_ns), ("idle", lambda r: r.times.idle_ns),
        ("gpu_time", lambda r: r.gpu_ns)]
    for name, get in parts:
        if not timed and name != "gpu_time":
            continue
        vb, vn = get(base) / base.steps, get(new) / new.steps
        t.rows.append([name, _ms(vb), _ms(vn), _ms(vn - vb), _pct(vn - vb, vb)])
    if not_per_step:
        t.notes.append("C" + not_per_step[1:] + ".")  # the sentence starts "cannot compare"
    elif timed and base.step_sources == new.step_sources == [WHOLE]:
        t.notes.append("Neither run has steps (no ProfilerStep or step ranges, at most one optimizer step): each "
                       "one's 'step' is its whole capture, so the figures per step compare only as far as the two "
                       "captures ran the same work.")
    if gpus:
        t.notes.append(f"The runs ran on different GPUs (base: {', '.join(gpus[0])}; new: {', '.join(gpus[1])}): "
                       "every change here is the GPU's and the code's together, and cannot be put down to the code.")
    if timed:
        t.notes.append(
            "step = kernel + copy + idle, for each run and so for the deltas (to rounding): time when a kernel ran, "
            "when a copy or memset ran and no kernel (overlap charged once: kernel > memcpy > memset, as in the "
            "overview), and when the GPU ran nothing, within the steps' windows.")
    else:
        why = "; ".join(_untimed(r) for r in (base, new) if not r.timed)
        t.notes.append(f"Cannot split the step time into kernel, copy and idle: {why}; GPU time per step only.")
    t.notes.append("gpu_time: every activity's duration summed (overlapping ones counted twice), what the rows below "
                   "add up to.")
    return t


def _untimed(r: Run) -> str:
    """Why run ``r`` has no step windows: no GPU activity at all, or activities without start/end times."""
    n = sum(w.totals["records"] for w in r.workers)
    if not n:
        return f"{r.label} has no GPU activity"
    return f"{r.label}'s {n} GPU activities carry no start/end times"


def _rows(base: Run, new: Run, b: dict, n: dict, by: str, top: int | None) -> tuple[Table, float | None]:
    calls = "calls" if by in ("op", "shape") else "launches"
    key_cols = {"op": [("op", "Op")], "shape": [("op", "Op"), ("shapes", "Input shapes")],
                "line": [("line", "Line")], "kernel": [("kernel", "Kernel")]}[by]
    title = {"op": "GPU time per op", "shape": "GPU time per op and input shapes", "line": "GPU time per line",
             "kernel": "GPU time per kernel"}[by]
    t = Table.of(f"diff_{by}", f"{title}: change per step", key_cols + [
        ("base_ms", "Base (ms/step)"), ("new_ms", "New (ms/step)"), ("delta_ms", "Delta (ms)"),
        ("delta_pct", "Delta %"), (f"base_{calls}", f"Base {calls}/step"), (f"new_{calls}", f"New {calls}/step"),
        (f"delta_{calls}", f"Delta {calls}"), ("present", "In")])
    zero = Sums()
    found = []
    for key in set(b) | set(n):
        sb, sn = b.get(key, zero), n.get(key, zero)
        vb, vn = sb.ns / base.steps, sn.ns / new.steps
        cb, cn = sb.calls / base.steps, sn.calls / new.steps
        present = "both" if key in b and key in n else ("base" if key in b else "new")
        shown = _shown(key, sb.names | sn.names, by)
        found.append((-abs(vn - vb), str(key), [*shown, _ms(vb), _ms(vn), _ms(vn - vb), _pct(vn - vb, vb),
                                                 _calls(cb), _calls(cn), _calls(cn - cb), present]))
    found.sort(key=lambda x: (x[0], x[1]))
    t.rows = [row for _, _, row in found]
    both = _in_both(b, n) / base.steps + _in_both(n, b) / new.steps
    matched = _pct(both, _in_both(b, None) / base.steps + _in_both(n, None) / new.steps)
    t.notes.append("Rows sorted by the size of the change per step, largest first; each run's rows add up to its "
                   f"{'kernel time' if by == 'kernel' else 'GPU time'} per step. "
                   f"{'na' if matched is None else matched}% of both runs' time is in rows found in both ('In': "
                   "both, or the one run holding the row).")
    renamed: set = set()
    if by in ("op", "shape"):
        for k in set(b) & set(n):
            ob, on = ({x[0] if by == "shape" else x for x in s.names} for s in (b[k], n[k]))
            if ob != on:
                renamed.add(f"{' / '.join(sorted(ob))} (base) = {' / '.join(sorted(on))} (new)")
    renamed = sorted(renamed)
    if renamed:
        t.notes.append("Ops the two captures name differently, matched under one name (the Python call's, where "
                       "one capture names the aten op under it; an op's in-place and out-of-place forms are one "
                       "op): " + "; ".join(renamed[:20]) + (f"; and {len(renamed) - 20} more" if len(renamed) > 20
                                                             else "") + ".")
    if by == "line":
        t.notes.append("Lines match by file name and line number: a line that moved (an edit above it) shows as "
                       "one line gone and one new; '-' holds the activities without a recorded line.")
        blind = [r.label for r, sums_ in ((base, b), (new, n)) if sums_ and set(sums_) == {line_name("-")}]
        if blind:
            t.notes.append(f"Cannot match by line: no activity of {' or '.join(blind)} has a recorded line (its "
                           "capture holds no call stacks), so all of its time is in '-'.")
    if top is not None and len(t.rows) > top:
        t.notes.append(f"The {top} rows that changed most, of {len(t.rows)}.")
        t.rows = t.rows[:top]
    return t, matched


def _only(base: Run, new: Run, b: dict, n: dict, top: int | None) -> Table:
    t = Table.of("diff_kernels_only", "Kernels that ran in one run only", [
        ("kernel", "Kernel"), ("present", "Only in"), ("base_ms", "Base (ms/step)"), ("new_ms", "New (ms/step)"),
        ("delta_ms", "Delta (ms)"), ("base_launches", "Base launches/step"), ("new_launches", "New launches/step")])
    rows = []
    for side, mine, other, steps in (("base", b, n, base.steps), ("new", n, b, new.steps)):
        for key, s in mine.items():
            if key in other:
                continue
            ms, launches = _ms(s.ns / steps), _calls(s.calls / steps)
            rows.append((-s.ns / steps, key, [key, side, ms if side == "base" else 0.0, ms if side == "new" else 0.0,
                                              -ms if side == "base" else ms, launches if side == "base" else 0.0,
                                              launches if side == "new" else 0.0]))
    rows.sort(key=lambda x: (x[0], x[1]))
    t.rows = [r for _, _, r in rows]
    if t.rows:
        t.notes.append("Kernels by name and template arguments (namespaces, parameter lists and the ways the two "
                       "demanglers differ taken out), so that kernels sharing a short name but running different "
                       "code (the functors of multi_tensor_apply_kernel) stay apart, and one kernel matches across "
                       "nsys and PyTorch profiler captures.")
    else:
        t.empty = ("Every kernel ran in both runs (by name and template arguments, matched as across nsys and "
                   "PyTorch profiler captures).")
    if top is not None and len(t.rows) > top:
        t.notes.append(f"The {top} longest, of {len(t.rows)}.")
        t.rows = t.rows[:top]
    return t
