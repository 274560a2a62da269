"""The intermediate form every reader yields and ``correlate`` consumes.

Readers only translate their format's rows into these shapes; all joining (activity -> launch call ->
enclosing ranges -> forward op) happens once, in ``correlate``. Times are integer nanoseconds.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from pyprof.common import BoundedDict


class Activity(NamedTuple):
    """One GPU activity. ``launch_key`` joins it to a :class:`Launch` (unique per file; None = no launch)."""

    kind: str  # kernel | memcpy | memset
    start_ns: int
    end_ns: int
    device: int | None
    stream: int | None
    pid: int | None
    correlation_id: int | None
    launch_key: object
    long_name: str = ""
    short_name: str = ""
    grid: tuple = ()
    block: tuple = ()
    registers: int | None = None
    static_smem_bytes: int | None = None
    dynamic_smem_bytes: int | None = None
    bytes: int | None = None
    copy_kind: str | None = None
    smem_bytes: int | None = None  # per block, static + dynamic (when a reader knows only the total)
    est_occupancy_pct: float | None = None  # the profiler's own estimate (PyTorch profiler traces)
    # A kernel replayed from a CUDA graph: the key of the Launch that stands for the capture of its graph node (the
    # node's creation inside the ranges active at capture time), whose attribution it takes; its launch_key stays
    # the graph launch. None for any other activity.
    attribution_key: object = None
    # (graph id, node id) of a replayed activity where the profile names them on the activity itself (Kineto since
    # 2026: "graph id", "graph node id"); the same node has the same pair in every replay of its graph.
    graph_node: tuple | None = None


class Launch(NamedTuple):
    """One CPU API call that started GPU work (runtime or driver API; a graph launch starts many)."""

    thread: object  # hashable, unique per thread in the file
    start_ns: int
    end_ns: int
    api: str
    key: object  # equals Activity.launch_key of the work it started
    pid: int | None
    tid: int | None
    # The calling line from the call's own Python backtrace (nsys --python-backtrace=cuda), where the reader has
    # one (Source.launch_sites): the sweep gives it to a launch whose ranges name no line.
    site: str | None = None


class MemoryEvent(NamedTuple):
    """One allocation or free (record.MEMORY_COLUMNS). ``thread`` and ``call_ns`` place the CPU call that made it
    among the ranges (None: outside every range, as an allocation made before the capture); ``device`` is
    "cuda:N", "cpu" or "host"; ``level`` one of record.LEVELS."""

    thread: object
    call_ns: int | None
    t_ns: int
    pid: int | None
    device: str
    level: str
    bytes: int
    allocated: int | None
    reserved: int | None
    addr: int | None


#: A push/pop range is a plain tuple, as an SQLite cursor yields it (millions of them go through the
#: sweep, most enclosing no launch, so nothing is built per range, and each field fetched costs):
#: ``(thread, start_ns, end_ns, text, payload)``. ``thread`` is hashable and unique per thread in the file
#: (``Source.process_of`` gives its process, which scopes backward links); ``payload`` the NVTX int64
#: payload (pyprof's call id) or None. ``text`` is decoded when a launch needs it. A reader whose ranges
#: come decoded (Kineto's structured ops) appends a sixth field, the Marker or None, and sets
#: ``ranges_decoded = True``.
RANGE_ROW = ("thread", "start_ns", "end_ns", "text", "payload")

#: The runtime and driver calls that launch a CUDA graph, or a HIP graph on ROCm (with their versioned spellings).
GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")


#: What the sweep (correlate.Correlator.launch_infos) yields per launch call, a plain tuple that crosses a
#: process boundary cheaply: ``(key, api, start_ns, end_ns, pid, tid, attribution, call, flags)``.
#: ``attribution`` is None (no enclosing range) or ``(number, fields)``: the number is unique per attribution
#: in a parse (launches in the same ranges share one), so the writer encodes each once, and from a worker
#: process a launch whose attribution the writer still holds carries the number alone (an int; see
#: attribution_window).
#: ``fields`` are the record's attribution fields in the order of record.ATTRIBUTION, the ``marker`` entries,
#: ``args`` and ``fwd`` already JSON (encode.attribution). ``call`` numbers the op call (subSeqId counts
#: kernels per call) or is None; ``flags`` see correlate.HAS_OP.
LAUNCH_INFO = ("key", "api", "start_ns", "end_ns", "pid", "tid", "attribution", "call", "flags")

#: Attributions the writer keeps by number: launches that share one are close together (an op call's
#: kernels), so a few thousand cover nearly every reuse.
WINDOW = 4096


def attribution_window() -> BoundedDict:
    """The attributions kept by number: at least the newest WINDOW, at most twice as many, the oldest dropped
    first (common.BoundedDict).

    A sweep worker and the writer each keep one and add the same numbers in the same order, so each knows what
    the other holds, and the worker sends an attribution's fields only when the writer no longer has them."""
    return BoundedDict(2 * WINDOW)


class GpuInfo(NamedTuple):
    """What the export says about one GPU."""

    name: str | None
    props: dict | None


class Source:
    """What every reader provides; each reader subclasses it. Iterators are sorted by start time (ranges of equal
    start in any order).

    What only some readers can do is declared here too, with the default that says a reader cannot:
    ``ranges_decoded``, ``launch_sites``, ``temp_path``, ``reopen_args`` and ``launch_times``."""

    path: str  # the input's name in messages (the path as given, '<stdin>')
    format: str
    oddities: dict  # what of the input was left out or read leniently -> how often (reported, --strict refuses)

    #: Range rows carry a sixth field, their Marker or None (RANGE_ROW: a reader whose ranges come decoded).
    ranges_decoded: bool = False
    #: Launches carry their calling line from their own backtrace (Launch.site); launch_times then yields Launches.
    launch_sites: bool = False
    #: Kernels replayed from CUDA graphs that the reader could not tie to their capture, by why (kineto_graphs).
    graph_untied: dict | None = None
    #: Work calls made while a stream was captured into a CUDA graph: they ran nothing (kineto_graphs).
    graph_captured: int = 0
    #: The temporary file the reader reads (a decompressed export, stdin spooled to disk): close_source deletes it.
    temp_path: str | None = None

    def check(self) -> None:
        """Raise InputError unless the input is one this reader reads (once, before any output)."""
        raise NotImplementedError

    def gpus(self) -> dict[int, GpuInfo]:
        """GPU name and properties by device id."""
        raise NotImplementedError

    def ranges(self) -> Iterator[tuple]:
        """Push/pop ranges as RANGE_ROW tuples, in start order."""
        raise NotImplementedError

    def process_of(self, thread: object) -> object:
        """The process of a range's or launch's ``thread``."""
        raise NotImplementedError

    def launches(self) -> Iterator[Launch]:
        """The launch calls, in start order."""
        raise NotImplementedError

    def activities(self) -> Iterator[Activity]:
        """The GPU activities, in start order."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the input (a database connection)."""
        raise NotImplementedError

    def reopen_args(self) -> tuple | None:
        """(class, file, display name) with which a sweep worker process opens the same input again; None where
        it cannot (a trace read into memory): then the sweep runs in this process."""
        return None

    def dist(self) -> dict | None:
        """The input's place in a distributed job (record.DIST_KEYS: rank, world size, backend), where the input
        says it; None where it does not (an nsys export holds whole processes, whose ranks it does not name)."""
        return None

    def memory_events(self) -> Iterator[MemoryEvent]:
        """The allocations and frees the input records, in any order (the memory lines sort them)."""
        return iter(())

    def host_intervals(self) -> dict[tuple, tuple]:
        """(pid, one of record.HOST_CATEGORIES) -> (starts, ends, names): sequences of the intervals the input has
        of it, in any order, nested or overlapping as they come (the host lines merge them); names only of steps
        (each range's text), else empty."""
        return {}

    def profiled_window(self, cut: bool = False) -> tuple[int, int, str] | None:
        """(start_ns, end_ns, source: one of record.WINDOW_SOURCES) of what the input recorded, where it says; None
        where it says nothing. ``cut``: activities without their launch call were found (a cut of a longer capture,
        or one begun mid-run): the capture's own bounds may then describe more than the export holds, and only
        what it holds bounds the window. The GPU activities are within the window or widen it (prof's steps)."""
        return None

    def kernel_launches(self) -> dict:
        """pid -> the kernel launch calls of each process with a CUDA API call (record.window_line): 0 for one
        that made calls but launched no kernel."""
        return {}

    def program_marks(self) -> Iterator[tuple]:
        """(pid, text) of each program mark the capture holds (record.PROGRAM_MARK_PREFIX: pyprof.step()'s step
        times), in time order."""
        return iter(())

    def launch_times(self) -> Iterator[tuple]:
        """What the sweep needs of each launch call, in the order of :meth:`launches`: tuples that start
        ``(thread, start_ns, end_ns)``. A reader with a cheaper way to read only those overrides this."""
        return self.launches()
