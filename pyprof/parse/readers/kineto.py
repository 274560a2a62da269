"""PyTorch profiler traces (Kineto JSON, ``.json`` or ``.json.gz``): events -> the intermediate model.

The trace is read in blocks (kineto_json.TraceReader; never loaded as one document); only the fields needed are
kept, in compact tuples, because Kineto does not write events in time order and they must be sorted. The whole
file is read in ``check()``, so a truncated trace fails before any output. Kernels carry the
``correlation`` of their ``cuda_runtime`` / ``cuda_driver`` launch event; ``cpu_op`` and
``user_annotation`` events are the ranges, and the ops' structured arguments (Input Dims, Input type,
Concrete Inputs, Sequence number, Fwd thread id) become markers directly, with no text to parse.

A trace recorded ``with_stack=True`` holds the Python frames as ``python_function`` events (``file.py(28):
forward``) nested in time on each thread: an op's call site is the innermost frame around it that is not
torch's (as pyprof.init() chooses it). With ``with_modules=True`` some of those frames are the modules
(``nn.Module: Block_0``): they become module ranges, so the records' ``layer`` is the module hierarchy.
"""
from __future__ import annotations

import gzip
import re
import zlib
from sys import intern  # the names of ranges, launch calls and frames: a few hundred, each repeated thousands of times
from decimal import Decimal
from typing import IO, Iterator

from pyprof.common import BoundedDict, InputError, expansion_cap, no_cyclic_gc
from pyprof.parse.attribute import markers as mk
from pyprof.parse.readers.activities import Activity, GpuInfo, Launch, MemoryEvent, Source
from pyprof.parse.readers.demangle import demangle, short_name
from pyprof.parse.readers.frames import INTERNAL
from pyprof.parse.readers.kineto_graphs import captured_calls, tie_replays
from pyprof.parse.readers.kineto_json import UNSET, Args, Event, Guarded, SharedValues, TraceReader, args_of
from pyprof.record import DIST_KEYS, INT_MAX, INT_MIN

_KERNEL_CATS = {"kernel"}
_COPY_CATS = {"gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
_RANGE_CATS = {"cpu_op", "user_annotation", "operator"}
_OP_CATS = {"cpu_op", "operator"}

_PYTHON_CATS = {"python_function"}
#: A Python frame event's name: "transformer.py(28): forward", "torch/nn/modules/module.py(1779): _call_impl".
_FRAME = re.compile(r"^(.+)\((\d+)\): ")
_MODULE_FRAME = "nn.Module: "

# Kineto's memcpy event names end with the direction, e.g. "Memcpy HtoD (Pageable -> Device)".
_COPY_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP")


#: Times past this many ns from the epoch (year 2262) are no times (a 1e999 microsecond stamp).
MAX_TIME_NS = 2 ** 63 - 1
BAD_EVENT = "events with a missing or malformed time, left out"
BAD_MEMORY = "memory events with a missing or malformed time or size, left out"
_MEMORY = "[memory]"
_DATALOADER = "enumerate(DataLoader)"


class BadEvent(ValueError):
    """An event whose times cannot be read: left out and counted."""


def _ns(us) -> int:
    """Kineto microseconds (a JSON number: int, or Decimal of its exact text) -> integer nanoseconds. Raises BadEvent."""
    if type(us) is Decimal:
        if not us.is_finite():
            raise BadEvent(us)
        ns = int(us * 1000)
    elif type(us) is int:
        ns = us * 1000
    elif type(us) is float and us - us == 0:
        ns = int(round(us * 1000))
    else:
        raise BadEvent(us)  # a string, a bool, null, a list...
    if not -MAX_TIME_NS <= ns <= MAX_TIME_NS:
        raise BadEvent(us)
    return ns


def _num(v):
    """A number of a device's properties, as JSON can hold it (a non-finite one is no number)."""
    if type(v) is Decimal:
        return float(v) if v.is_finite() and abs(v) < Decimal("1e300") else None
    return v


def _int(v) -> int | None:
    """An id or a count: an integer a record can hold (record.INT_MIN to INT_MAX: JSON's have no bound), else
    None (the event is kept, the value is not)."""
    return v if type(v) is int and INT_MIN <= v <= INT_MAX else None


def _graph_node(args) -> tuple | None:
    """A replayed activity's (graph id, node id) where the trace names them (0: not from a graph)."""
    g, n = args.graph_id, args.graph_node_id
    return (g, n) if type(n) is int and n and type(g) is int else None


def _ints(v) -> tuple:
    """A launch configuration: a list of integers (each as _int takes it), else empty."""
    return tuple(v) if type(v) is list and len(v) <= 3 and all(_int(x) is not None for x in v) else ()


class KinetoSource(Source):
    """Reader of one Kineto JSON trace. Raises InputError on check() for anything that is not one."""

    format = "kineto"

    def __init__(self, path: str, display: str | None = None, gzipped: bool = False):
        self.file = path
        self.path = display or path
        self.gzipped = gzipped
        self._ranges: list = []
        self._launches: list = []
        self._acts: list = []
        self._gpus: dict[int, GpuInfo] = {}
        self._cpu_pids: set = set()  # processes that launched GPU work
        self._frames: list = []  # python_function events: ((pid, tid), start, end, name)
        self._memory: list = []  # MemoryEvent of each "[memory]" instant event (profile_memory=True)
        self.oddities: dict = {}  # events left out (the summary reports them)
        self._cap = expansion_cap(path) if gzipped else None
        self._dist: dict | None = None  # distributedInfo: rank, world size, backend (record.DIST_KEYS)
        # A kernel name -> (the name, its short name): a trace repeats a few hundred names thousands of times, so
        # each is shortened once and its activities share one string.
        self._names = BoundedDict(1 << 14)
        self._shared = SharedValues()  # ops' argument lists, one object per distinct text
        self._threads = BoundedDict(1 << 12)  # see _thread
        self._window: tuple | None = None  # (first start, last end) of the events read (_arrange)
        self._kernel_launches: dict = {}  # pid -> kernel launch calls (_arrange)

    def _open(self) -> IO[bytes]:
        """The trace's bytes, after a UTF-8 byte-order mark if it starts with one (some editors add one)."""
        f = gzip.open(self.file, "rb") if self.gzipped else open(self.file, "rb")
        if f.read(3) != b"\xef\xbb\xbf":
            f.seek(0)
        return f

    def check(self) -> None:
        """Read the whole trace in one pass; raise InputError if it is not a complete one."""
        # What is made here (tuples, strings, markers holding lists) has no cycles: the collector's passes over
        # it, hundreds of thousands of objects, would only cost time (0.3 s of 1 s on a ResNet-50 trace).
        with no_cyclic_gc():
            try:
                self._read()
            except (OSError, EOFError, zlib.error) as e:
                raise InputError(self.path, f"unreadable or truncated trace ({_first_line(e)})") from None
            self._arrange()

    def _arrange(self) -> None:
        """The events read, in the order and with the context the iterators promise."""
        if self._frames:
            self._python_context()
        self._ranges.sort(key=lambda r: (r[1], -r[2]))
        self._launches.sort(key=lambda x: x.start_ns)
        self._acts.sort(key=lambda a: a.start_ns)
        self._memory.sort(key=lambda m: m.t_ns)
        self.graph_captured = captured_calls(self._launches, self._acts)
        self._launches, self._acts, self.graph_untied = tie_replays(self._launches, self._acts)
        self._window_and_launches()
        # GPU events name the device as their process; the process that ran them is the one that launched GPU
        # work. A trace is written per process, so an activity whose launch event is missing (launched before the
        # trace began) belongs to that process too.
        pids = [p for p in self._cpu_pids if type(p) is int]
        if len(pids) == 1 and len(self._cpu_pids) == 1:
            self._acts = [a._replace(pid=pids[0]) for a in self._acts]
        self._output_shapes()

    def _window_and_launches(self) -> None:
        """The trace's bounds over every timed event read (ranges, launch calls, GPU activities, Python frames), and
        each process's kernel launch calls: kept here, as close() drops the events before the window lines go out."""
        # each kind of event is a tuple with its start and end at 1 and 2 (RANGE_ROW, Launch, Activity, frames)
        kinds = [x for x in (self._ranges, self._launches, self._acts, self._frames) if x]
        self._window = (min(min(e[1] for e in x) for x in kinds), max(max(e[2] for e in x) for x in kinds)) \
            if kinds else None
        counts: dict = {}
        for x in self._launches:
            counts[x.pid] = counts.get(x.pid, 0) + ("Launch" in x.api)
        self._kernel_launches = counts

    def profiled_window(self, cut: bool = False) -> tuple[int, int, str] | None:
        """The trace's first event start to its last event end (the profiler's active window)."""
        return None if self._window is None else (*self._window, "trace")

    def kernel_launches(self) -> dict:
        """pid -> its cuda_runtime / cuda_driver events named like a kernel launch (cudaLaunchKernel,
        cuLaunchKernel, hipLaunchKernel, cudaGraphLaunch, ...)."""
        return self._kernel_launches

    def _read(self) -> None:
        """The events kept, then the devices and distributedInfo (an object's keys: the events may be a bare array,
        as PyTorch 1.8 previews wrote them)."""
        with self._open() as f:
            reader = TraceReader(Guarded(f, self.path, self._cap), self.path)
            seen = False
            take, take_memory = self._take, self._take_memory
            for events in reader.blocks():
                for ev in events:
                    if type(ev) is not Event:
                        continue
                    ph = ev.ph
                    if ph is UNSET:
                        continue
                    seen = True
                    if ph == "X":
                        take(ev)
                    elif ev.name == _MEMORY and ph in ("i", "I"):
                        take_memory(ev, args_of(ev.args))
        if not seen and reader.root_is_array:
            raise InputError(self.path, "JSON array without trace events: not a PyTorch profiler trace")
        if not seen and not reader.events_key:
            raise InputError(self.path, "JSON without 'traceEvents': not a PyTorch profiler trace")
        self._dist = _dist_keys(reader.dist) if reader.dist is not None else None
        self._take_devices(reader.devices)

    def _take_devices(self, devices) -> None:
        for dev in devices:
            if isinstance(dev, dict) and type(dev.get("id")) is int:
                props = {k: _num(v) for k, v in dev.items() if k not in ("id", "name")
                         and (type(v) in (int, Decimal, str, bool) or v is None)}
                name = dev.get("name")
                self._gpus[dev["id"]] = GpuInfo(name if type(name) is str else None, props)

    def _python_context(self) -> None:
        """Call sites and module ranges from the Python frames (``with_stack`` / ``with_modules`` traces): one
        sweep per thread over its frames and ops by start time, with the stack of frames open at each op."""
        by_thread: dict = {}
        for f in self._frames:
            by_thread.setdefault(f[0], []).append(f)
        ops: dict = {}
        for r in self._ranges:
            m = r[5]
            if m is not None and r[0] in by_thread:
                ops.setdefault(r[0], []).append(r)
        modules = []
        for thread, frames in by_thread.items():
            frames.sort(key=lambda f: (f[1], -f[2]))
            for _t, start, end, name in frames:
                if name.startswith(_MODULE_FRAME):
                    m = mk.Marker(mk.MODULE, name[len(_MODULE_FRAME):])
                    modules.append((thread, start, end, f"module:{m.name}", None, m))
            mine = sorted(ops.get(thread, ()), key=lambda r: (r[1], -r[2]))
            open_frames: list = []  # (end, site or None), outermost first
            k = 0
            backward_until = None  # the end of the open autograd node: its ops take their forward op's line
            for r in mine:
                if r[5].backward and (backward_until is None or r[2] > backward_until):
                    backward_until = r[2]
                while k < len(frames) and frames[k][1] <= r[1]:
                    _t, start, end, name = frames[k]
                    while open_frames and open_frames[-1][0] <= start:
                        open_frames.pop()
                    open_frames.append((end, _site(name)))
                    k += 1
                while open_frames and open_frames[-1][0] <= r[1]:
                    open_frames.pop()
                if backward_until is not None and r[1] <= backward_until:
                    # Backward work runs where backward() was called, or on autograd's thread: the frames
                    # around it (the caller's, named by the line it was on when the profiler started) are not
                    # its line. Its forward link gives the forward op's, as under Nsight Systems.
                    continue
                site = next((s for end, s in reversed(open_frames) if s is not None and end >= r[2]), None)
                if site is not None and r[5].site is None:
                    r[5].site = site
        self._frames = []
        self._ranges += modules

    def _output_shapes(self) -> None:
        """Give forward ops of markers.OUTPUT_OPS whose arguments lack the values that decide their output
        (PyTorch 1.8/1.9 write no Concrete Inputs) their output's shape: the first input of their backward node,
        the gradient of that output, has it. The whole trace is in memory, so the node, which runs later, is
        at hand."""
        grads: dict = {}
        for (pid, _tid), _s, _e, _n, _p, m in self._ranges:
            if m is not None and m.backward and m.seq is not None and type(m.raw_sizes) is list and m.raw_sizes:
                shape = m.raw_sizes[0]
                if type(shape) is list and shape and all(_int(d) is not None for d in shape):
                    grads.setdefault((pid, m.seq), shape)
        if not grads:
            return
        for (pid, _tid), _s, _e, _n, _p, m in self._ranges:
            if m is not None and not m.backward and m.seq is not None and m.concrete is None \
                    and mk.OUTPUT_OPS.search(m.op):
                shape = grads.get((pid, m.seq))
                if shape is not None:
                    m.outputs = [shape]

    def _take(self, ev: Event) -> None:
        """A complete ("X") event: a kernel, copy, launch call, Python frame or range; others are not read. Its
        arguments are decoded only for the kinds that read them (a Python frame's are not)."""
        try:
            start = _ns(ev.ts)
            end = start + (_ns(ev.dur) if ev.dur is not UNSET else 0)
        except BadEvent:
            self.oddities[BAD_EVENT] = self.oddities.get(BAD_EVENT, 0) + 1
            return
        if end < start or end > MAX_TIME_NS:
            self.oddities[BAD_EVENT] = self.oddities.get(BAD_EVENT, 0) + 1
            return
        cat = str(ev.cat).lower()
        name = ev.name
        name = name if type(name) is str else "" if name is None else str(name)
        if cat in _PYTHON_CATS:
            self._frames.append((self._thread(ev), start, end, intern(name)))
        elif cat in _KERNEL_CATS:
            args = args_of(ev.args)
            corr = _int(args.correlation)
            occupancy = args.occupancy
            names = self._names.get(name)
            if names is None:
                long = demangle(name)  # CUPTI and roctracer leave some names mangled (CUTLASS in cuDNN, ck_tile)
                names = (long, _short(long))
                self._names.add(name, names)
            self._acts.append(Activity("kernel", start, end, _int(args.device), _int(args.stream), None, corr, corr,
                                       names[0], names[1], _ints(args.grid), _ints(args.block),
                                       _int(args.registers), smem_bytes=_int(args.smem),
                                       est_occupancy_pct=_num(occupancy) if type(occupancy) in (int, Decimal)
                                       else None, graph_node=_graph_node(args)))
        elif cat in _COPY_CATS:
            args = args_of(ev.args)
            kind = _COPY_CATS[cat]
            corr = _int(args.correlation)
            ck = next((k for k in _COPY_KINDS if k in name), None) if kind == "memcpy" else None
            self._acts.append(Activity(kind, start, end, _int(args.device), _int(args.stream), None, corr, corr, name,
                                       name, bytes=_int(args.nbytes), copy_kind=ck, graph_node=_graph_node(args)))
        elif cat in _LAUNCH_CATS:
            corr = _int(args_of(ev.args).correlation)
            if corr is not None:
                thread = self._thread(ev)
                pid, tid = thread
                self._cpu_pids.add(pid)
                self._launches.append(Launch(thread, start, end, intern(name), corr,
                                             pid if type(pid) is int else None, tid if type(tid) is int else None))
        elif cat in _RANGE_CATS:
            thread = self._thread(ev)
            marker = None
            if name[:1] == "{":
                # A marker pyprof wrote as a record_function name (a compiled kernel's: pyprof.nvtx.inductor).
                marker = mk.decode(name)
            elif cat in _OP_CATS:
                args = args_of(ev.args)
                if not (cat == "operator" and _legacy_annotation(name, args)):
                    shared = self._shared.get
                    dims = shared(args.dims if args.dims else args.dims_18)
                    types, concrete = shared(args.types), shared(args.concrete)
                    marker = mk.seq_marker(name, _int(args.seq), dims if type(dims) is list else None,
                                           types if type(types) is list else None,
                                           concrete if type(concrete) is list else None, _int(args.fwd_tid))
            self._ranges.append((thread, start, end, intern(name), None, marker))

    def _take_memory(self, ev: Event, args: Args) -> None:
        """A ``[memory]`` instant event: an allocation (Bytes > 0) or free of PyTorch's allocator on one device,
        with the allocator's totals after it. One without a time or a size is left out and counted."""
        size = _int(args.mem_bytes)
        try:
            t = _ns(ev.ts)
        except BadEvent:
            t = None
        if t is None or size is None or not 0 <= t <= MAX_TIME_NS:
            self.oddities[BAD_MEMORY] = self.oddities.get(BAD_MEMORY, 0) + 1
            return
        kind, dev = _int(args.device_type), _int(args.device_id)
        device = intern("cpu" if kind == 0 else f"cuda:{dev}" if kind == 1 and dev is not None else
                        f"device type {kind}:{dev}")
        thread = self._thread(ev)
        pid = thread[0]
        self._memory.append(MemoryEvent(thread, t, t, pid if type(pid) is int else None, device, "allocator",
                                        size, _int(args.allocated), _int(args.reserved), _int(args.addr)))

    def _thread(self, ev: Event) -> tuple:
        """``(pid, tid)`` of an event: one tuple per thread, which all its events share (a trace has a few threads
        and hundreds of thousands of events)."""
        pid, tid = ev.pid, ev.tid
        if type(pid) is int and type(tid) is int:  # nearly every event: its ids as read are the key
            thread = self._threads.get((pid, tid))
            if thread is not None:
                return thread
        key = (_ident(pid), _ident(tid))
        thread = self._threads.get(key)
        if thread is None:
            self._threads.add(key, key)
            thread = key
        return thread

    def host_intervals(self) -> dict[tuple, tuple[list, list, list]]:
        """Steps, DataLoader ranges and ops (cpu_op events, autograd nodes among them) from the ranges, and the
        CUDA API calls, by process."""
        out: dict = {}
        for (pid, _tid), start, end, name, _p, marker in self._ranges:
            category = "op" if marker is not None else "step" if name.startswith("ProfilerStep#") else \
                "dataloader" if name.startswith(_DATALOADER) else None
            if category is not None and type(pid) is int:
                s, e, n = out.setdefault((pid, category), ([], [], []))
                s.append(start)
                e.append(end)
                if category == "step":
                    n.append(name)
        for launch in self._launches:
            if launch.pid is not None:
                s, e, _n = out.setdefault((launch.pid, "runtime"), ([], [], []))
                s.append(launch.start_ns)
                e.append(launch.end_ns)
        return out

    def dist(self) -> dict | None:
        """Rank, world size and backend from the trace's ``distributedInfo`` (torch.distributed initialised when
        the profiler started), else None."""
        return self._dist

    def memory_events(self) -> Iterator[MemoryEvent]:
        """The ``[memory]`` events, in time order (each is its own call: the time it was recorded)."""
        return iter(self._memory)

    def gpus(self) -> dict[int, GpuInfo]:
        """GPU name and properties by device id, from ``deviceProperties``."""
        return self._gpus

    ranges_decoded = True  # range rows carry their Marker (model.RANGE_ROW)

    def ranges(self) -> Iterator[tuple]:
        """cpu_op and user_annotation events, in start order, outer before inner."""
        return iter(self._ranges)

    @staticmethod
    def process_of(thread: tuple) -> object:
        """The process of a range's thread, ``(pid, tid)``."""
        return thread[0]

    def launches(self) -> Iterator[Launch]:
        """cuda_runtime / cuda_driver events with a correlation id, in start order."""
        return iter(self._launches)

    def activities(self) -> Iterator[Activity]:
        """Kernels, memcpys and memsets in start order."""
        return iter(self._acts)

    def close(self) -> None:
        """Drop the events read."""
        self._ranges = self._launches = self._acts = self._memory = []


def _dist_keys(info: dict) -> dict:
    """A ``distributedInfo`` object as record.DIST_KEYS (a value of another type: null)."""
    take = {"int": _int, "str": lambda v: v if type(v) is str else None}
    return {key: take[kind](info.get(key)) for key, kind in DIST_KEYS.items()}


def _ident(v):
    """A process or thread id: PyTorch 1.8-1.9 wrote them as strings ("25772"); other strings ("stream 7", a
    thread's name) are kept as they are, so that they still tell threads apart; anything else by its text."""
    if type(v) is str and len(v) < 30:
        try:
            v = int(v)
        except ValueError:
            return v
    if type(v) is int:
        return v if _int(v) is not None else str(v)  # too large for a record's pid: its text tells threads apart
    if type(v) is str:
        return v
    return None if v is None else str(v)


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def _legacy_annotation(name: str, args: Args) -> bool:
    """True for a PyTorch 1.8-1.9 ``record_function`` range written with cat "Operator", like an op
    (``ProfilerStep#5``, ``Optimizer.step#SGD.step``, ``enumerate(DataLoader)#...``): an op has a namespace
    (``aten::add``) or is an autograd node, and carries "Input Dims" when shapes are recorded."""
    if "::" in name or mk.is_backward_text(name):
        return False
    return "#" in name or not (args.dims or args.dims_18 or args.seq is not UNSET)


def _site(frame: str) -> str | None:
    """``file:line`` of a Python frame event's name when it is user code, else None (torch's frames, builtins,
    module frames)."""
    m = _FRAME.match(frame)
    if m is None or INTERNAL.match(m.group(1)):
        return None
    return f"{m.group(1)}:{m.group(2)}"


def _short(name: str) -> str:
    return short_name(name) if "(" in name or "<" in name or name.startswith("_Z") else name
