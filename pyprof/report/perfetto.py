"""Chrome / Perfetto trace JSON from parse's records: GPU activities on one row per device and stream, their
CPU launch calls on one row per thread under the CPU-side ranges that enclose them (steps, layers, ops, as
slices spanning their launches), a flow arrow from each launch to its kernel, and our op, layer, call site,
shapes and modelled FLOPs/bytes in each kernel's ``args``.

The format is the Trace Event Format's JSON object form (``{"traceEvents": [...]}``) that ui.perfetto.dev and
chrome://tracing open. Events are written as the records come, so a trace of millions of kernels never sits
in memory; ``max_events`` stops after that many GPU activities.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import IO, Iterable, Iterator

from pyprof.common import BoundedDict, InputError
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.model.results import first_name
from pyprof.prof.table.rows import rows as model_rows
from pyprof.prof.model.tensorcores import TC_TEXT
from pyprof.report.page import MEASURED_TIMES, json_text

#: Synthetic process ids of the GPU rows: far above any OS pid (Linux caps pids at 2**22), so a GPU never
#: shares a process row with a CPU process.
GPU_PID_BASE = 1 << 30
#: What a CPU range slice's times are, in its args, where the records do not carry the range's push and pop (records
#: of an older parse, a replayed CUDA graph node's ranges): a reader of the trace takes a slice for a measured one
#: otherwise.
RANGE_TIMES = ("from the first launch call made inside the range to the end of its last: the records carry the "
               "range's name, not its push and pop times, so the range began at or before the slice and ended at or "
               "after it")
#: Launches remembered to draw a graph launch (one call, many kernels) once: bounded, see _Launches.
_LAUNCH_MEMORY = 65536


#: Launches held per thread to put them in launch order before their ranges are drawn: records come in GPU
#: start order, and a launch runs ahead of its kernel by at most the streams' queue depth (1,024 per stream).
_REORDER = 8192


@dataclass
class TraceStats:
    """What a trace holds: activities written, activities in the input, CPU range slices, and whether the cap
    cut it."""

    activities: int = 0
    seen: int = 0
    launches: int = 0
    flows: int = 0
    ranges: int = 0
    ranges_measured: int = 0
    origin_ns: int | None = None  # subtracted from every time written (_origin), set by the first record
    truncated: bool = False


def range_stack(d: dict, call_start_ns: int, call_end_ns: int) -> tuple:
    """The record's enclosing ranges as ((name, call id, (push_ns, pop_ns) or None), ...), outermost first. A
    pyprof op range carries its marker's call id, so two calls of one op in a row are two slices; other ranges
    (steps, modules, autograd) are told apart by their push time where the record has it, else by what encloses
    them. Times that do not enclose the launch call (a damaged or hand-made record) are not used."""
    names = d.get("ranges")
    if not names or type(names) is not list:
        return ()
    marks = [m for m in d.get("marker") or () if type(m) is dict]
    times = d.get("range_ns")
    if type(times) is not list or len(times) != 2 * len(names):
        times = None
    keys = []
    mi = 0
    for i, n in enumerate(names):
        call = None
        if mi < len(marks) and n == f"{marks[mi].get('mod')}.{marks[mi].get('op')}":
            call = marks[mi].get("call")
            mi += 1
        span = None
        if times is not None:
            push, pop = times[2 * i], times[2 * i + 1]
            if type(push) is int and type(pop) is int and push <= call_start_ns and call_end_ns <= pop:
                span = (push, pop)
        keys.append((str(n), call, span))
    return tuple(keys)


class _RangeSlices:
    """The CPU-side ranges (steps, layers, ops) of one thread as slices: from their push to their pop where the
    records carry those times, else from the first to the last launch call made inside the range (RANGE_TIMES).
    Launches are put in order through a bounded heap, then a stack of open ranges is closed where the next
    launch's stack differs; children lie within their parents (measured ranges nest as they were pushed, and a
    range drawn from launches lies within the measured ranges around it), so the slices nest."""

    def __init__(self, pid: int, tid: int) -> None:
        self.pid, self.tid = pid, tid
        self.heap: list = []
        self.seq = 0
        self.open: list = []  # [key, start_ns, end_ns] per depth, outermost first
        self.last_start = None

    def add(self, start_ns: int, end_ns: int, stack: tuple, out: list, st: "TraceStats") -> None:
        self.seq += 1  # ties in time keep arrival order, and tuples of different stacks never compare
        heapq.heappush(self.heap, (start_ns, self.seq, end_ns, stack))
        if len(self.heap) > _REORDER:
            self._take(heapq.heappop(self.heap), out, st)

    def _take(self, item, out: list, st: "TraceStats") -> None:
        start, _seq, end, stack = item
        depth = 0
        for opened, key in zip(self.open, stack):
            if opened[0] != key:
                break
            depth += 1
        self._close(depth, out, st)
        for o in self.open:
            o[2] = max(o[2], end)
        self.open += [[key, start, end] for key in stack[depth:]]

    def _close(self, depth: int, out: list, st: "TraceStats") -> None:
        while len(self.open) > depth:
            (name, call, span), t0, t1 = self.open.pop()
            st.ranges += 1
            if span is not None:
                st.ranges_measured += 1
                t0, t1 = span
            args = {"range": name} if call is None else {"range": name, "call": call}
            args["times"] = RANGE_TIMES if span is None else MEASURED_TIMES
            out.append({"ph": "X", "name": name, "cat": "range", "pid": self.pid, "tid": self.tid,
                        "ts": _us(t0 - st.origin_ns), "dur": _us(t1 - t0), "args": args})

    def flush(self, out: list, st: "TraceStats") -> None:
        while self.heap:
            self._take(heapq.heappop(self.heap), out, st)
        self._close(0, out, st)


def _us(ns: int) -> float:
    # Microseconds as floats, the unit of the format; nanosecond precision survives as the fraction.
    return ns / 1000.0


#: A time in microseconds keeps its nanoseconds in a double up to about this many ns (52 days); a PyTorch-profiler
#: trace's times count from the epoch (1.7e18 ns), where a double's step is a quarter of a microsecond, enough to make
#: a range end after its parent's end in a viewer.
EXACT_NS = 4 * 10 ** 15


def _origin(first_ns: int) -> int:
    """What every time written is counted from: 0 for a profile's own clock, else a whole second an hour before
    the first record (ranges pushed before it stay positive), written in ``otherData`` as ``ts_origin_ns``."""
    return 0 if first_ns < EXACT_NS else (first_ns // 10 ** 9 - 3600) * 10 ** 9


def _shapes(args: list) -> str:
    parts = []
    for a in args or ():
        if type(a) is not dict:
            continue
        if type(a.get("shape")) is list:
            parts.append(f"{a.get('dtype') or '?'}{a['shape']}")
        elif "value" in a:
            parts.append(repr(a["value"]))
    return ", ".join(parts)


def _qualified(mod: str | None, op: str | None) -> str | None:
    return f"{mod}.{op}" if mod and op else op


def kernel_args(d: dict, m) -> dict:
    """The ``args`` shown for one GPU activity: what launched it and our modelled numbers (None left out)."""
    fwd = d.get("fwd") or {}
    op, mod = first_name(d.get("op")), first_name(d.get("mod"))
    a = {
        "op": _qualified(mod, op),
        "dir": d.get("dir") or None,
        "forward op": _qualified(first_name(fwd.get("mod")), first_name(fwd.get("op"))),
        "layer": ".".join(d.get("layer") or fwd.get("layer") or ()) or None,
        "callsite": d.get("callsite") or fwd.get("callsite"),
        "shapes": _shapes(d.get("args") or fwd.get("args") or ()) or None,
        "params": m.params or None,
        "flops": m.flops,
        "bytes": m.bytes,
        "tensor cores": None if m.tc is None else TC_TEXT[m.tc],
        "not modelled": m.reason,
        "grid": d.get("grid") or None,
        "block": d.get("block") or None,
        "registers": d.get("registers"),
        "correlation id": d.get("correlation_id"),
        "kernel": d.get("kLongName") or None,
    }
    return {k: v for k, v in a.items() if v is not None}


class _Rows:
    """Names the trace's rows once each, with metadata events emitted the first time a row is used."""

    def __init__(self) -> None:
        self.gpu: dict = {}
        self.devices: set = set()
        self.cpu: set = set()
        self.pids: set = set()

    def gpu_row(self, d: dict, out: list) -> tuple[int, int]:
        dev, stream, pid = d.get("device"), d.get("stream"), d.get("pid")
        key = (dev, stream, pid)
        row = self.gpu.get(key)
        if row is None:
            gpid = GPU_PID_BASE + (dev if isinstance(dev, int) else 999)
            # Stream ids are per CUDA context: two processes on one GPU get separate rows for "stream 7".
            row = self.gpu[key] = (gpid, len(self.gpu) + 1)
            if dev not in self.devices:
                self.devices.add(dev)
                out.append({"ph": "M", "name": "process_name", "pid": gpid,
                            "args": {"name": f"GPU {dev if dev is not None else '?'}" +
                                     (f" ({d['gpu']})" if d.get("gpu") else "")}})
                out.append({"ph": "M", "name": "process_sort_index", "pid": gpid, "args": {"sort_index": -1}})
            others = [k for k in self.gpu if k[0] == dev and k[1] == stream and k != key]
            label = f"stream {stream}" + (f" (pid {pid})" if others else "")
            out.append({"ph": "M", "name": "thread_name", "pid": gpid, "tid": row[1], "args": {"name": label}})
        return row

    def cpu_row(self, d: dict, out: list) -> tuple[int, int]:
        pid, tid = d.get("pid") or 0, d.get("tid") or 0
        if pid not in self.pids:
            self.pids.add(pid)
            out.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"CPU process {pid}"}})
        if (pid, tid) not in self.cpu:
            self.cpu.add((pid, tid))
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"thread {tid}"}})
        return pid, tid


class _Launches:
    """Which launch calls were already drawn. A CUDA graph launch starts many kernels with one correlation id;
    its slice is drawn once. Bounded memory: after _LAUNCH_MEMORY launches the oldest half is forgotten (a
    graph's kernels run close together, so forgetting old ones costs at worst a duplicate slice)."""

    def __init__(self) -> None:
        self.seen = BoundedDict(_LAUNCH_MEMORY)

    def first(self, key) -> bool:
        if key in self.seen:
            return False
        self.seen.add(key, None)
        return True


def events(records: Iterable[dict], max_events: int | None = None,
           stats: TraceStats | None = None) -> Iterator[dict]:
    """Yield the trace events of ``records`` (dicts with parse's keys, in start order): row names ("M"), one
    complete event ("X") per GPU activity and per launch call, and flow start/end ("s"/"f") pairs.

    ``max_events`` caps the GPU activities (their launches and flows come with them); ``stats`` is filled in.
    Never raises for a record missing launch fields: the activity is drawn without its launch.
    """
    return source_events([("<records>", enumerate(records, 1))], max_events, stats)


#: The name rows() gives a record of a wrong type when it is told no file (a caller's name replaces it).
_UNNAMED = ("input", "<input>")


def source_events(sources: Iterable[tuple[str, Iterable[tuple[int, dict]]]], max_events: int | None = None,
                  stats: TraceStats | None = None) -> Iterator[dict]:
    """``events`` of several inputs, each ``(name, (line number, record) pairs)``: one set of rows and flow
    ids, each input's op calls on their own (a call never spans two files). Raises InputError naming the
    input and line of a record field of a wrong type."""
    st = stats if stats is not None else TraceStats()
    rows, launches = _Rows(), _Launches()
    for name, numbered in sources:
        try:
            yield from _input_events(numbered, max_events, st, rows, launches)
        except InputError as e:
            if e.path not in _UNNAMED:
                raise
            raise InputError(name, e.problem) from None


def _input_events(numbered: Iterable[tuple[int, dict]], max_events: int | None, st: TraceStats, rows: "_Rows",
                  launches: "_Launches") -> Iterator[dict]:
    out: list = []
    threads: dict = {}  # (pid, tid) -> _RangeSlices
    # Each kernel shows its share of its op call's numbers, as prof's rows do (report.rows holds a record until
    # its call is closed).
    for _idx, d, m, _roof in model_rows(numbered, Modeller(share=True), None, False, Coverage()):
        st.seen += 1
        if max_events is not None and st.activities >= max_events:
            st.truncated = True
            continue  # keep counting, so the caller can say "N of M"
        st.activities += 1
        gpid, gtid = rows.gpu_row(d, out)
        start = d.get("start_ns") or 0
        if st.origin_ns is None:
            st.origin_ns = _origin(start)
        ts = _us(start - st.origin_ns)
        name = d.get("kShortName") or d.get("kind") or "activity"
        out.append({"ph": "X", "name": name, "cat": d.get("kind") or "kernel", "pid": gpid, "tid": gtid,
                    "ts": ts, "dur": _us(d.get("kDuration") or (d.get("end_ns") or start) - start),
                    "args": kernel_args(d, m)})
        a0, a1 = d.get("api_start_ns"), d.get("api_end_ns")
        if a0 is not None and a1 is not None and d.get("tid") is not None:
            pid, tid = rows.cpu_row(d, out)
            stack = range_stack(d, a0, a1)
            if stack:
                slices = threads.get((pid, tid))
                if slices is None:
                    slices = threads[(pid, tid)] = _RangeSlices(pid, tid)
                slices.add(a0, a1, stack, out, st)
            if launches.first((pid, d.get("correlation_id"), a0)):
                st.launches += 1
                out.append({"ph": "X", "name": d.get("api") or "launch", "cat": "cuda_api", "pid": pid,
                            "tid": tid, "ts": _us(a0 - st.origin_ns), "dur": _us(a1 - a0),
                            "args": {"correlation id": d.get("correlation_id"), "kernel": name}})
            # Flow ids count kernels rather than reuse the correlation id: that id is unique only within a
            # process, and a graph launch gives one id to many kernels, each of which needs its own arrow: the
            # count of flows so far, over every input.
            st.flows += 1
            # "s" sits inside the launch slice; "f" with bp "e" binds to the kernel slice that encloses its ts.
            out.append({"ph": "s", "name": "launch", "cat": "launch", "id": st.flows, "pid": pid, "tid": tid,
                        "ts": _us(a0 - st.origin_ns)})
            out.append({"ph": "f", "bp": "e", "name": "launch", "cat": "launch", "id": st.flows, "pid": gpid,
                        "tid": gtid, "ts": ts})
        yield from out
        out.clear()
    for slices in threads.values():
        slices.flush(out, st)
    yield from out


def write_trace(records: Iterable[dict], out: IO[str], max_events: int | None = None) -> TraceStats:
    """Write the trace JSON of ``records`` to ``out``, event by event; return what it holds.

    The JSON stays valid when cut by ``max_events``; ``otherData`` says how many activities it shows of how many.
    """
    return write_source_trace([("<records>", enumerate(records, 1))], out, max_events)


def write_source_trace(sources: Iterable[tuple[str, Iterable[tuple[int, dict]]]], out: IO[str],
                       max_events: int | None = None) -> TraceStats:
    """``write_trace`` of several inputs, as ``source_events`` takes them. Raises InputError naming the input
    and line of a record field of a wrong type."""
    st = TraceStats()
    out.write('{"traceEvents":[\n')
    sep = ""
    for ev in source_events(sources, max_events, st):
        out.write(sep)
        out.write(json_text(ev))
        sep = ",\n"
    other = {"producer": "pyprof report --trace", "activities": st.activities, "activities_in_input": st.seen,
             "cpu_range_slices": st.ranges, "cpu_range_slices_measured": st.ranges_measured,
             "truncated": st.truncated, "ts_origin_ns": st.origin_ns or 0}
    out.write('\n],"displayTimeUnit":"ns","otherData":' + json_text(other) + "}\n")
    return st
