"""The report's table of every GPU activity: one row per kernel, copy and memset, filled during the views' one
pass (``aggregate(..., observe=table)``) and embedded column by column, so a page of a million activities
carries numbers and small ids rather than a million objects.

Text columns (kernel, op, direction, layer, line, worker) are interned: each column is a list of ids into its
own list of strings. The op, line and layer strings are the views' group keys (pyprof.prof.table.groups), so a row of
the operators or lines table and the activities it drills down to are matched by the same text.
"""
from __future__ import annotations

from array import array

import numpy as np

from pyprof.prof.table.groups import callsite_key, dir_key, kernel_key, kernel_labels, layer_path, op_key
from pyprof.prof.views.helpers import short_lines

#: A known-unknown number in the integer columns (no FLOPs modelled, no Tensor Core verdict).
NA = -1
#: Columns in page order: (key, header). The page formats each by its key's unit suffix.
COLUMNS = (("start_ms", "Start (ms)"), ("dur_us", "Duration (us)"), ("kernel", "Kernel"), ("op", "Op"),
           ("dir", "Dir"), ("line", "Line"), ("layer", "Layer"), ("flops", "FLOPs"), ("bytes", "Bytes"),
           ("tflops", "TFLOP/s"), ("roofline_pct", "Roofline %"), ("tc", "TC"), ("worker", "Worker"))
_TEXT = ("kernel", "op", "dir", "line", "layer", "worker")


class _Interned:
    """Strings to small ids, in first-seen order."""

    __slots__ = ("ids", "ids_array")

    def __init__(self) -> None:
        self.ids: dict = {}
        self.ids_array = array("i")

    def add(self, text: str) -> None:
        i = self.ids.get(text)
        if i is None:
            i = self.ids[text] = len(self.ids)
        self.ids_array.append(i)

    def strings(self) -> list[str]:
        return list(self.ids)


class ActivityTable:
    """Collects one row per GPU activity; call it as aggregate's ``observe``. ``to_dict`` is what the page
    embeds."""

    def __init__(self) -> None:
        self.start_ns = array("q")
        self.dur_ns = array("q")
        self.flops = array("q")  # NA when not modelled on this activity
        self.bytes = array("q")  # modelled bytes moved (a copy's size); NA when not modelled
        self.roofline_pct = array("d")  # NaN when unknown
        self.tc = array("b")  # 1 on Tensor Cores, 0 eligible and not, NA when not a Tensor Core question
        self.text = {k: _Interned() for k in _TEXT}
        self.short_names: dict = {}  # a kernel's full name -> its short name (the kernels view's labels)
        self._workers: dict = {}  # id(WorkerData) -> (index, WorkerData), names read at the end
        # GPU time of the activities that carry modelled FLOPs (the headline's modelled share)
        self.flops_ns = 0

    def __call__(self, w, d: dict, m, roof) -> None:
        start = d.get("start_ns") or 0
        dur = d.get("kDuration") or 0
        self.start_ns.append(start)
        self.dur_ns.append(dur)
        flops = m.flops
        self.flops.append(NA if flops is None else flops)
        self.bytes.append(NA if m.bytes is None else m.bytes)
        if flops:
            self.flops_ns += dur
        pct = roof.roofline_pct
        self.roofline_pct.append(float("nan") if pct is None else pct)
        self.tc.append(NA if m.tc is None else int(bool(m.tc)))
        t = self.text
        # by full name, labelled at the end as the kernels view labels them, so that a row of that view and
        # its activities carry one name
        full = kernel_key(d)
        t["kernel"].add(full)
        if full not in self.short_names:
            self.short_names[full] = d.get("kShortName") or full if d.get("kind", "kernel") == "kernel" else None
        t["op"].add(op_key(d))
        t["dir"].add(dir_key(d))
        t["line"].add(callsite_key(d))
        # "/" joins a layer path as the layers view's path column does
        t["layer"].add("/".join(layer_path(d)) or "-")
        key = id(w)
        entry = self._workers.get(key)
        if entry is None:
            entry = self._workers[key] = (len(self._workers), w)
        t["worker"].ids_array.append(entry[0])

    def __len__(self) -> int:
        return len(self.start_ns)

    def merge(self, part: "ActivityTable", workers: dict) -> None:
        """Append ``part``, the table of the activities right after these (a chunk of the views' pass in a
        worker process: pyprof.prof.aggregate_jobs); ``workers`` maps id() of its WorkerData to the merged
        ones."""
        for name in ("start_ns", "dur_ns", "flops", "bytes", "roofline_pct", "tc"):
            getattr(self, name).extend(getattr(part, name))
        for k in _TEXT:
            if k == "worker":
                continue
            mine = self.text[k]
            ids = np.array([mine.ids.setdefault(text, len(mine.ids)) for text in part.text[k].ids], np.int32)
            mine.ids_array.frombytes(ids[np.frombuffer(part.text[k].ids_array, np.int32)].tobytes())
        index = {}
        for i, w in part._workers.values():
            merged = workers[id(w)]
            entry = self._workers.get(id(merged))
            if entry is None:
                entry = self._workers[id(merged)] = (len(self._workers), merged)
            index[i] = entry[0]
        index_map = np.array([index.get(i, 0) for i in range(max(index, default=-1) + 1)], np.int32)
        part_ids = np.frombuffer(part.text["worker"].ids_array, np.int32)
        self.text["worker"].ids_array.frombytes(index_map[part_ids].tobytes() if len(part_ids) else b"")
        for full, short in part.short_names.items():
            self.short_names.setdefault(full, short)
        self.flops_ns += part.flops_ns

    def to_dict(self) -> dict:
        """Columns as lists (numpy arrays, which the page's JSON writer serialises directly): times relative to
        the first activity's start, in ms and us to the ns; FLOPs, roofline and TC with None for na."""
        start = np.frombuffer(self.start_ns, dtype=np.int64)
        t0 = int(start.min()) if len(start) else 0
        dur = np.frombuffer(self.dur_ns, dtype=np.int64)
        flops = np.frombuffer(self.flops, dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            # FLOPs / ns = GFLOP/s; / 1e3 = TFLOP/s. NaN (unknown) where no FLOPs or no duration.
            tflops = np.where((flops > 0) & (dur > 0), flops / np.maximum(dur, 1) / 1e3, np.nan)
        roof = np.frombuffer(self.roofline_pct, dtype=np.float64)
        lines = self.text["line"].strings()
        _prefix, short = short_lines({x: None for x in lines if x != "-"})
        strings = {k: self.text[k].strings() for k in _TEXT}
        labels = kernel_labels({f: s for f, s in self.short_names.items() if s is not None})
        strings["kernel"] = [labels.get(f, f) for f in strings["kernel"]]
        strings["line"] = [short.get(x, x) for x in lines]
        strings["worker"] = [w.name for _i, w in sorted(self._workers.values(), key=lambda e: e[0])]
        return {
            "n": len(self), "columns": [c for c, _ in COLUMNS], "headers": [h for _, h in COLUMNS],
            "strings": strings,
            "start_ms": _rounded((start - t0) / 1e6, 6), "dur_us": _rounded(dur / 1e3, 3),
            "flops": _known(flops), "bytes": _known(np.frombuffer(self.bytes, dtype=np.int64)),
            "tflops": _rounded(tflops, 3), "roofline_pct": _rounded(roof, 2),
            "tc": [None if x < 0 else x for x in self.tc.tolist()],
            **{k: np.frombuffer(self.text[k].ids_array, dtype=np.int32) for k in _TEXT},
        }


def _known(values: np.ndarray):
    # NA (-1) becomes None (JSON null: na); a column with none stays an array
    return [None if v < 0 else v for v in values.tolist()] if (values < 0).any() else values


def _rounded(values: np.ndarray, decimals: int) -> list:
    # NaN becomes None (JSON null: na); rounding keeps the page small (a float64 prints 17 digits).
    r = np.round(values, decimals)
    if np.isnan(r).any():
        return [None if x != x else x for x in r.tolist()]
    return r
