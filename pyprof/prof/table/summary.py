"""``pyprof prof --group-by``: GPU activities grouped by op, layer, kernel, call site or direction
(pyprof.prof.table.groups, the grouping the views use), with count, total and % of GPU time, the share of it in
communication kernels, FLOPs, TFLOP/s,
roofline % (time at peak over measured time, summed over the group's kernels) and the share of the group's time
spent in Tensor Core kernels; sorted by time, optionally the top N. Kernels group by their full name, labelled
by ``groups.kernel_labels``.
"""
from __future__ import annotations

from typing import IO, Iterable

from pyprof.common import UsageError, no_cyclic_gc
from pyprof.prof.table import parallel
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.formats import FORMATS
from pyprof.prof.load.contract import check_file_ending
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.load.reader import lean_loads
from pyprof.prof.table.rows import RowStream, omitted_read, rows, stream_rows
from pyprof.prof.table.groups import GROUP_KEYS, SAMPLE_KEYS, GroupBy, add, kernel_labels, merge_into, sample
from pyprof.prof.model.roofline import Peaks

# Time in ms, rounded to 0.1 us, as the views show it (one unit per quantity in every table).
# Comm%: the share of the group's time in communication kernels (groups.is_comm), so that an op that is a
# collective (TorchRec's All2All_Pooled_Req, DDP's allreduce_) reads as communication, not computation.
SUMMARY_COLUMNS = ["key", "count", "time_ms", "time_pct", "comm_pct", "flops", "tflops", "roofline", "tc_pct"]
SUMMARY_HEADERS = ["Key", "Count", "Time(ms)", "Time%", "Comm%", "FLOPs", "TFLOP/s", "Roofline%", "TC%"]
#: The first column's header: what the rows are grouped by (the column key stays ``key`` for CSV and JSON Lines).
KEY_HEADERS = {"op": "Op", "layer": "Layer", "kernel": "Kernel", "callsite": "Line", "dir": "Direction"}


def summarize(records: Iterable[tuple[int, dict]], out: IO[str], group_by: str, fmt: str = "space",
              width: int = 0, top: int | None = None, peaks: Peaks | None = None, path: str = "<input>") -> Coverage:
    """Write the grouped summary table of records already decoded (``(line number, record)`` pairs, as
    reader.read_records yields them); return the coverage. A group's numbers are those of
    pyprof.prof.table.groups.Group, as the views show them: ``na`` for FLOPs none of which is modelled, TFLOP/s without
    FLOPs, a Roofline% none of whose activities has a roofline (nothing modelled, or no peak known for its GPU),
    and a TC% where Tensor Cores apply to none of its activities; never a 0 that reads as 0% efficient."""
    by = _group_by(group_by)
    table = _Table()
    coverage = Coverage()
    row = _row_function(by)
    table.add(row(i, d, m, r) for i, d, m, r in rows(records, Modeller(share=True), peaks or Peaks(), True,
                                                     coverage, path))
    table.write(out, group_by, fmt, width, top)
    return coverage


def summarize_stream(stream: IO[bytes], path: str, out: IO[str], group_by: str, fmt: str = "space",
                     width: int = 0, top: int | None = None, peaks: Peaks | None = None, jobs: int = 1) -> Coverage:
    """``summarize`` of the records on a binary stream (what the CLI calls), decoding of each line only the keys
    the model, the Sample and the group's key read (reader.lean_loads: a line it refuses is decoded whole, as
    read_records decodes it). ``jobs`` > 1: chunks of the input are grouped in worker processes
    (pyprof.prof.table.parallel) and their groups added up in input order. Raises InputError naming the line of a
    malformed record."""
    by = _group_by(group_by)
    check_file_ending(stream, path)  # a file cut short is refused before any output
    peaks = peaks or Peaks()
    table = _Table()
    if jobs > 1 and parallel.available() and parallel.suits(stream):
        coverage = parallel.run_parallel(stream, path, _chunk_plan(by), table.merge, peaks, jobs)
        table.write(out, group_by, fmt, width, top)
        return coverage
    coverage = Coverage()
    plan = _chunk_plan(by)()
    with no_cyclic_gc():
        stream_rows(stream, path, RowStream(Modeller(share=True), plan.row, peaks, True, coverage, plan.lean,
                                            omitted=plan.omitted), table.add)
    table.write(out, group_by, fmt, width, top)
    return coverage


def _group_by(group_by: str) -> GroupBy:
    if group_by not in GROUP_KEYS:
        raise UsageError(f"--group-by {group_by!r}: choose one of {', '.join(GROUP_KEYS)}")
    return GROUP_KEYS[group_by]


def _row_function(by: GroupBy):
    """What one activity gives its group: (key, Sample, short kernel name)."""
    keyf = by.key

    def row(_idx: int, d: dict, m, r) -> tuple:
        return keyf(d), sample(d, m, r), d.get("kShortName")
    return row


def _chunk_plan(by: GroupBy):
    """How rows are made from lines (serially, and in --jobs workers, which send back their chunk's _Table):
    lean decoding of the keys the model, the Sample and the group's key read."""
    keys = {*Modeller.RECORD_KEYS, "gpu", *SAMPLE_KEYS, *by.reads}

    def plan() -> parallel.ChunkPlan:
        return parallel.ChunkPlan(_row_function(by), True, lean_loads(sorted(keys)), omitted_read(keys), _Table.of)
    return plan


class _Table:
    """The groups, added to in input order (a group's place among equal times is that of its first activity)."""

    def __init__(self) -> None:
        self.groups: dict = {}
        self.shorts: dict = {}  # a group's key -> its first activity's short name (--group-by kernel's labels)

    def add(self, rows_: Iterable[tuple]) -> None:
        groups, shorts = self.groups, self.shorts
        for k, s, short in rows_:
            if k not in groups:
                shorts[k] = short or k
            add(groups, k, s)

    @classmethod
    def of(cls, rows_: list) -> "_Table":
        table = cls()
        table.add(rows_)
        return table

    def merge(self, later: "_Table") -> None:
        """Add the groups of the input's next chunk: the sums are the serial run's (the one float among them,
        ideal_ns, is exact whatever the order: groups.on_grid)."""
        groups, shorts = self.groups, self.shorts
        for k, g in later.groups.items():
            if k not in groups:
                shorts[k] = later.shorts[k]
            merge_into(groups, k, g)

    def write(self, out: IO[str], group_by: str, fmt: str, width: int, top: int | None) -> None:
        groups = self.groups
        total = sum(g.ns for g in groups.values()) or 1
        table = sorted(groups.items(), key=lambda kv: -kv[1].ns)
        if top:
            table = table[:top]
        labels = kernel_labels(self.shorts) if group_by == "kernel" else {}
        cls = FORMATS[fmt]
        w = cls(out, SUMMARY_COLUMNS, [KEY_HEADERS.get(group_by, "Key")] + SUMMARY_HEADERS[1:], width)
        w.header()
        body = []
        for k, g in table:
            ns = g.ns
            vals = (labels.get(k, k), g.count, round(ns / 1e6, 4), 100.0 * ns / total, g.comm_pct, g.known_flops,
                    g.tflops, g.roofline_pct, g.tc_pct)
            if not cls.raw:
                vals = tuple("na" if v is None else (v if i == 2 else round(v, 3)) if isinstance(v, float) else v
                             for i, v in enumerate(vals))  # the time keeps its 0.1 us
            body.append(vals)
        w.rows(body)
        w.close()
