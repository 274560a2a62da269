"""``pyprof prof --group-by``: GPU activities grouped by op, layer, kernel, call site or direction
(pyprof.prof.groups, the grouping the views use), with count, total and % of GPU time, FLOPs, TFLOP/s,
roofline % (time at peak over measured time, summed over the group's kernels) and the share of the group's time
spent in Tensor Core kernels; sorted by time, optionally the top N. Kernels group by their full name, labelled
by ``groups.kernel_labels``.
"""
from __future__ import annotations

from typing import IO, Iterable

from pyprof.common import UsageError
from pyprof.prof.modeller import Modeller
from pyprof.prof.formats import FORMATS
from pyprof.prof.coverage import Coverage
from pyprof.prof.rows import rows
from pyprof.prof.groups import GROUP_KEYS, add, kernel_labels, sample
from pyprof.prof.roofline import Peaks

# Time in ms, rounded to 0.1 us, as the views show it (one unit per quantity in every table).
SUMMARY_COLUMNS = ["key", "count", "time_ms", "time_pct", "flops", "tflops", "roofline", "tc_pct"]
SUMMARY_HEADERS = ["Key", "Count", "Time(ms)", "Time%", "FLOPs", "TFLOP/s", "Roofline%", "TC%"]


def summarize(records: Iterable[tuple[int, dict]], out: IO[str], group_by: str, fmt: str = "space",
              width: int = 0, top: int | None = None, peaks: Peaks | None = None, path: str = "<input>") -> Coverage:
    """Write the grouped summary table; return the coverage. A group's numbers are those of
    pyprof.prof.groups.Group, as the views show them: ``na`` for FLOPs none of which is modelled, TFLOP/s without
    FLOPs, a Roofline% none of whose activities has a roofline (nothing modelled, or no peak known for its GPU),
    and a TC% where Tensor Cores apply to none of its activities; never a 0 that reads as 0% efficient."""
    if group_by not in GROUP_KEYS:
        raise UsageError(f"--group-by {group_by!r}: choose one of {', '.join(GROUP_KEYS)}")
    keyf = GROUP_KEYS[group_by]
    coverage = Coverage()
    groups: dict = {}
    shorts: dict = {}  # --group-by kernel: full name -> short name
    for _i, d, m, r in rows(records, Modeller(share=True), peaks or Peaks(), True, coverage, path):
        k = keyf(d)
        if group_by == "kernel" and k not in groups:
            shorts[k] = d.get("kShortName") or k
        add(groups, k, sample(d, m, r))
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
        vals = (labels.get(k, k), g.count, round(ns / 1e6, 4), 100.0 * ns / total, g.known_flops, g.tflops,
                g.roofline_pct, g.tc_pct)
        if not cls.raw:
            vals = tuple("na" if v is None else (v if i == 2 else round(v, 3)) if isinstance(v, float) else v
                         for i, v in enumerate(vals))  # the time keeps its 0.1 us
        body.append(vals)
    w.rows(body)
    w.close()
    return coverage
