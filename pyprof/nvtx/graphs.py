"""CUDA graphs captured while ``init()`` is on: their ranges kept, and written into the capture when profiling starts.

A graph is usually captured long before anyone profiles (torch.compile's reduce-overhead mode during warm-up,
serving engines at start-up). Nsight Systems then keeps the graph's nodes (``CUDA_GRAPH_NODE_EVENTS``, at the
times they were created, before the profiled range) but not pyprof's ranges around them, so a replay's kernels
have no op. While a ``torch.cuda.CUDAGraph`` captures, this module keeps the ranges pyprof pushes on the capturing
thread, with their times; when ``cudaProfilerStart`` is called (``torch.cuda.profiler.start()``, ``pyprof.step()``,
``pyprof run``) it writes them into the capture as graph marks: zero-length ranges whose text is
``{"pyprof":1,"graph":N,...}`` (record.GRAPH_MARK_PREFIX), each with the clock's reading at its push as its
payload, so that parse places the ranges on the profile's timeline (docs/markers.md, "Graph marks").
"""
from __future__ import annotations

import json
import threading
import time

import torch

from pyprof.record import GRAPH_MARK_PREFIX

#: The clock the ranges are timed by; parse aligns it to the profile's through each mark's own reading.
CLOCK = time.CLOCK_MONOTONIC
#: At most this many ranges are kept per process (the oldest graphs' first); a capture of a whole training step
#: holds a few thousand.
MAX_RANGES = 500_000
#: The text of one mark stays under this many characters: the ranges of a large graph go in several marks.
MARK_CHARS = 60_000


class _Capture:
    """The ranges pushed on one thread while it captured one graph: [push_ns, pop_ns or None, text, call id]."""

    def __init__(self, number: int, tid: int) -> None:
        self.number = number
        self.tid = tid
        self.ranges: list[list] = []
        self.open: list[list] = []


class _Recorder:
    """What this process's graph captures pushed, kept until profiling starts."""

    def __init__(self) -> None:
        self.captures: list[_Capture] = []
        self.active: dict[int, _Capture] = {}  # thread ident -> its capture in progress
        self.kept = 0
        self.dropped = 0
        self.count = 0
        self.emitter = None
        self.lent = False  # the emitter was turned on for the captures alone (install's capture_begin)
        self.lock = threading.Lock()

    def begin(self, emitter) -> None:
        with self.lock:
            self.count += 1
            self.active[threading.get_ident()] = _Capture(self.count, threading.get_native_id())
            if self.emitter is None and emitter is not None:
                # the emitter's two entry points, recording on capturing threads while any capture is on
                self.emitter = emitter
                push, pop = emitter.push, emitter.pop
                emitter.push = lambda attrs, call_id: self._push(push, attrs, call_id)
                emitter.pop = lambda: self._pop(pop)
                self._sink = (push, pop)

    def end(self) -> None:
        with self.lock:
            capture = self.active.pop(threading.get_ident(), None)
            if capture is not None and capture.ranges:
                now = time.clock_gettime_ns(CLOCK)
                for r in capture.open:  # a range still open when the capture ended closes with it
                    r[1] = now
                self.captures.append(capture)
                self.kept += len(capture.ranges)
                while self.kept > MAX_RANGES and len(self.captures) > 1:
                    old = self.captures.pop(0)
                    self.kept -= len(old.ranges)
                    self.dropped += 1
            if not self.active and self.emitter is not None:
                self.emitter.push, self.emitter.pop = self._sink
                self.emitter = None

    def _push(self, push, attrs, call_id: int) -> None:
        push(attrs, call_id)
        capture = self.active.get(threading.get_ident())
        if capture is not None:
            message = getattr(attrs, "message", attrs)
            text = getattr(message, "string", message)
            if isinstance(text, str):
                r = [time.clock_gettime_ns(CLOCK), None, text, call_id]
                capture.ranges.append(r)
                capture.open.append(r)

    def _pop(self, pop) -> None:
        pop()
        capture = self.active.get(threading.get_ident())
        if capture is not None and capture.open:
            capture.open.pop()[1] = time.clock_gettime_ns(CLOCK)

    def parts(self) -> list[tuple[_Capture, str]]:
        """The JSON of every kept capture's ranges, in parts of under MARK_CHARS characters where one range allows."""
        out = []
        for c in self.captures:
            pieces: list[str] = []
            size = 0
            for r in c.ranges:
                piece = json.dumps(r, separators=(",", ":"))
                if pieces and size + len(piece) > MARK_CHARS:
                    out.append((c, ",".join(pieces)))
                    pieces, size = [], 0
                pieces.append(piece)
                size += len(piece) + 1
            if pieces:
                out.append((c, ",".join(pieces)))
        return out


recorder = _Recorder()


def write_marks(emitter) -> int:
    """Write every kept capture's ranges into the capture as graph marks (pushed and popped at once on this
    thread); the number of marks. Called once profiling has started: before, the profiler would drop them."""
    if emitter is None:
        return 0
    n = 0
    for c, ranges in recorder.parts():
        attrs = emitter.sink.attributes(f'{GRAPH_MARK_PREFIX}{c.number},"tid":{c.tid},"ranges":[{ranges}]}}')
        # the clock's reading is the range's payload, read just before the push (the text is registered by then):
        # parse takes the mark's start on the profile's timeline as this reading
        emitter.sink.push(attrs, time.clock_gettime_ns(CLOCK))
        emitter.sink.pop()
        n += 1
    return n


def install(state, cls=None) -> None:
    """Record graph captures while ``state.emitter`` is on, or while the wrappers are installed but off, and write
    them when profiling starts. ``cls``: the graph class whose captures are watched (``torch.cuda.CUDAGraph``)."""
    cls = cls or getattr(torch.cuda, "CUDAGraph", None)
    if cls is None or not hasattr(cls, "capture_begin"):
        return
    begin, end = cls.capture_begin, cls.capture_end

    def capture_begin(self, *args, **kwargs):
        out = begin(self, *args, **kwargs)
        if state.emitter is None and state.patches.saved and not recorder.active:
            # The wrappers are installed but off (pyprof run before its window, pyprof.step()'s warm-up): a graph
            # is captured once and replayed for good, so the markers are on for the capture alone.
            state.emitter = _capture_emitter(state)
            recorder.lent = True
        if state.emitter is not None:
            recorder.begin(state.emitter)
        return out

    def capture_end(self, *args, **kwargs):
        try:
            return end(self, *args, **kwargs)
        finally:
            recorder.end()
            if recorder.lent and not recorder.active:
                recorder.lent = False
                state.emitter = None

    state.patches.replace(cls, "capture_begin", capture_begin)
    state.patches.replace(cls, "capture_end", capture_end)
    cudart = _cudart()
    if cudart is not None:
        start = cudart.cudaProfilerStart

        def profiler_start(*args, **kwargs):
            out = start(*args, **kwargs)
            write_marks(state.emitter)
            return out

        state.patches.replace(cudart, "cudaProfilerStart", profiler_start)


def _capture_emitter(state):
    """An emitter for a capture while the markers are off, with the options of the last init() (its sink, its
    stack setting)."""
    from pyprof.nvtx.emit import Emitter, NvtxSink

    sink = state.options.get("sink")
    return Emitter(sink if sink is not None else NvtxSink(), stack=state.options.get("stack", False))


def _cudart():
    """torch's CUDA runtime module (what ``torch.cuda.profiler.start()`` calls through ``torch.cuda.cudart()``),
    or None in a build without CUDA. Imported, not asked of torch.cuda: that would initialise CUDA at init()."""
    try:
        from torch._C import _cudart
    except ImportError:
        return None
    return _cudart if hasattr(_cudart, "cudaProfilerStart") else None
