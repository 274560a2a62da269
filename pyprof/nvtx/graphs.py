"""CUDA graphs captured while ``init()`` is on: their ranges kept, and written into the capture when profiling starts.

A graph is usually captured long before anyone profiles (torch.compile's reduce-overhead mode during warm-up,
serving engines at start-up). Nsight Systems then keeps the graph's nodes (``CUDA_GRAPH_NODE_EVENTS``, at the
times they were created, before the profiled range) but not pyprof's ranges around them, so a replay's kernels
have no op. While a ``torch.cuda.CUDAGraph`` captures, this module keeps the ranges pyprof pushes on the capturing
thread, with their times; when ``cudaProfilerStart`` is called (``torch.cuda.profiler.start()``, ``pyprof.step()``,
``pyprof run``) it writes them into the capture as graph marks: zero-length ranges whose text is
``{"pyprof":1,"graph":N,...}`` (record.GRAPH_MARK_PREFIX), each with the clock's reading at its push as its
payload, so that parse places the ranges on the profile's timeline (docs/markers.md, "Graph marks").

Autograd's own ranges (``XBackward0, seq = N`` around each node, the forward ops' ``seq = N``) come from C++ and
are lost with the rest. While a capture is on, a backward pass started on the capturing thread has a hook on each
node of its graph that keeps the node's range on whichever thread runs it, in emit_nvtx's words, and a forward op
that made autograd nodes keeps one ``seq = N`` range per node inside its own: parse links the captured backward
kernels to their forward op as it does for a graph captured in the window.
"""
from __future__ import annotations

import functools
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
#: At most this many autograd nodes of one backward pass get hooks (a training step has a few thousand).
MAX_NODES = 200_000
#: The words of PyTorch's emit_nvtx for the engine's range around a node (parse's markers.ENGINE_PREFIX).
ENGINE_PREFIX = "autograd::engine::evaluate_function: "
#: Nodes' sequence numbers at or above this are no number (AccumulateGrad's is UINT64_MAX).
_NO_SEQ = 1 << 63
#: An op that made more autograd nodes than this keeps the first this many (a Python loop inside one wrapped call).
MAX_SEQS_PER_OP = 64


def _sequence_nr():
    """The autograd sequence number the next node made on this thread will take (None where torch has no way to
    ask)."""
    return None


_sequence_nr = getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", _sequence_nr)


class _Capture:
    """The ranges pushed on one thread while it captured one graph: [push_ns, pop_ns or None, text, call id]."""

    def __init__(self, number: int, tid: int) -> None:
        self.number = number
        self.tid = tid
        self.ranges: list[list] = []
        # the open ranges: [range, the sequence number when it was pushed, whether a range was pushed inside it]
        self.open: list[list] = []


class _Recorder:
    """What this process's graph captures pushed, kept until profiling starts."""

    def __init__(self) -> None:
        self.captures: list[_Capture] = []
        self.active: dict[int, _Capture] = {}  # thread ident -> its capture in progress
        # thread ident -> the ranges of backward nodes it ran for a capture in progress (autograd's threads)
        self.engine: dict[int, _Capture] = {}
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
            ended = [capture] if capture is not None else []
            if capture is not None:
                for ident in [i for i, c in self.engine.items() if c.number == capture.number]:
                    ended.append(self.engine.pop(ident))
            now = time.clock_gettime_ns(CLOCK)
            for c in ended:
                if not c.ranges:
                    continue
                for r, _, _ in c.open:  # a range still open when the capture ended closes with it
                    r[1] = now
                self.captures.append(c)
                self.kept += len(c.ranges)
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
                if capture.open:
                    capture.open[-1][2] = True
                capture.open.append([r, _sequence_nr(), False])

    def _pop(self, pop) -> None:
        pop()
        capture = self.active.get(threading.get_ident())
        if capture is not None and capture.open:
            r, seq, parent = capture.open.pop()
            now = time.clock_gettime_ns(CLOCK)
            after = _sequence_nr() if seq is not None and not parent else None
            if after is not None and after > seq:
                # The op made autograd nodes: one emit_nvtx-worded range per node inside it, for the backward
                # nodes to find (a module's range holds its ops' nodes, so only innermost ranges say this).
                name = _op_name(r[2])
                capture.ranges.extend([now, now, f"{name}, seq = {n}", None]
                                      for n in range(seq, min(after, seq + MAX_SEQS_PER_OP)))
                # the op's range ends after them: a range ending where another begins is not around it (parse
                # pops it first), and the backward nodes' link would miss the op's arguments and line
                now += 1
            r[1] = now

    # -- backward passes started while a capture is on ---------------------------------------------------------
    def hook_backward(self, roots) -> None:
        """Hook every node of the autograd graph behind ``roots`` (tensors) when this thread is capturing a graph:
        each node's run is kept as emit_nvtx's two ranges on the thread that runs it."""
        capture = self.active.get(threading.get_ident())
        if capture is None:
            return
        for node in graph_nodes([t.grad_fn for t in roots if isinstance(t, torch.Tensor)]):
            seq = node._sequence_nr()
            if not 0 <= seq < _NO_SEQ:
                continue
            name = node.name()
            # hooks registered on a node live as long as the node: a graph freed by the backward pass frees them
            node.register_prehook(functools.partial(self._node_begin, capture.number, name, seq))
            node.register_hook(functools.partial(self._node_end, capture.number))

    def _engine_capture(self, number: int) -> _Capture | None:
        ident = threading.get_ident()
        capture = self.active.get(ident)
        if capture is not None:
            return capture if capture.number == number else None
        capture = self.engine.get(ident)
        if capture is None:
            with self.lock:
                if not any(c.number == number for c in self.active.values()):
                    return None  # the capture has ended (a graph kept past it, run again later)
                capture = self.engine[ident] = _Capture(number, threading.get_native_id())
        return capture if capture.number == number else None

    def _node_begin(self, number: int, name: str, seq: int, grad_outputs) -> None:
        capture = self._engine_capture(number)
        if capture is not None:
            now = time.clock_gettime_ns(CLOCK)
            for text in (ENGINE_PREFIX + name, f"{name}, seq = {seq}"):
                r = [now, None, text, None]
                capture.ranges.append(r)
                capture.open.append([r, None, True])

    def _node_end(self, number: int, grad_inputs, grad_outputs) -> None:
        capture = self._engine_capture(number)
        if capture is not None and len(capture.open) >= 2:
            now = time.clock_gettime_ns(CLOCK)
            for _ in range(2):
                capture.open.pop()[0][1] = now

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


def graph_nodes(starts: list) -> list:
    """Every node of the autograd graph behind ``starts`` (nodes; None is none), each once, at most MAX_NODES.

    A C++ node's Python object lives only while referenced: ``next_functions`` makes new ones, and one dropped
    frees its memory for the next. So the nodes seen are kept, not their ``id``: a new object at a freed one's
    address would read as seen, and its whole subgraph go unvisited (a captured training step's backward kept
    4 of its nodes, on an H100)."""
    seen: set = set()
    todo = [n for n in starts if n is not None]
    while todo and len(seen) < MAX_NODES:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions)
    return list(seen)


def _op_name(text: str) -> str:
    """The op a pyprof range names, for the text of the sequence-number ranges inside it."""
    try:
        op = json.loads(text).get("op")
    except (ValueError, AttributeError):
        op = None
    return op if isinstance(op, str) and op else "op"


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
    _install_backward_hooks(state)
    cudart = _cudart()
    if cudart is not None:
        start = cudart.cudaProfilerStart

        def profiler_start(*args, **kwargs):
            out = start(*args, **kwargs)
            write_marks(state.emitter)
            return out

        state.patches.replace(cudart, "cudaProfilerStart", profiler_start)


def _install_backward_hooks(state) -> None:
    """``torch.autograd.backward`` and ``grad`` (what ``Tensor.backward`` calls) hook the graph they run when their
    thread is capturing a graph; otherwise they cost one dictionary lookup."""
    autograd = torch.autograd
    backward, grad = autograd.backward, autograd.grad
    if getattr(backward, "_pyprof_graphs", False):
        return  # installed already (a second graph class watched)

    @functools.wraps(backward)
    def hooked_backward(tensors, *args, **kwargs):
        if recorder.active:
            recorder.hook_backward([tensors] if isinstance(tensors, torch.Tensor) else list(tensors))
        return backward(tensors, *args, **kwargs)

    @functools.wraps(grad)
    def hooked_grad(outputs, *args, **kwargs):
        if recorder.active:
            recorder.hook_backward([outputs] if isinstance(outputs, torch.Tensor) else list(outputs))
        return grad(outputs, *args, **kwargs)

    hooked_backward._pyprof_graphs = hooked_grad._pyprof_graphs = True
    state.patches.replace(autograd, "backward", hooked_backward)
    state.patches.replace(autograd, "grad", hooked_grad)


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
