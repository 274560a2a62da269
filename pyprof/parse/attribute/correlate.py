"""Attribution, done once for every reader: activity -> launch call -> enclosing ranges -> forward op.

One sweep over ranges and launch calls in start-time order keeps an open-range stack per CPU thread. A
launch belongs to every push/pop range on its thread that encloses the call, innermost last. The
attribution of a stack top is computed once and shared by every launch made inside it. Ranges are the
readers' plain row tuples (model.RANGE_ROW): millions of them go through the sweep, most enclosing no
launch, so nothing is built for a range until a launch needs it. Backward kernels find their
forward op through the autograd sequence number: the backward node ``XBackward0, seq = N`` links to the
outermost forward range with ``seq = N`` in the same process, whose own enclosing ranges name the op,
its arguments, call site and layer. Forward ranges are always earlier in time than their backward node,
so the same time-ordered sweep has seen them already.
"""
from __future__ import annotations

import copy
import itertools
import operator
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

from pyprof.common import BoundedDict, no_cyclic_gc
from pyprof.parse.write import encode, native
from pyprof.parse.attribute import markers as mk
from pyprof.parse.readers.frames import user_site
from pyprof.parse.attribute.markers import quick_seq
from pyprof.parse.readers.activities import Source
from pyprof.record import ATTRIBUTION, COMPILED_MOD

#: Forward ranges remembered for backward links: at least this many, the newest (up to twice as many are
#: kept, and the oldest half dropped at once). A forward pass with more autograd ops than this before its
#: backward may lose the links of its oldest ops; bounded so forward-only captures (inference) do not grow
#: without limit.
FWD_MEMORY_OPS = 65_536

#: Decoded autograd markers kept for forward links (at least this many, the newest): a training step's forward ops
#: of a model of thousands of ops; each entry holds a marker of about 0.5 kB.
DECODED_MARKERS = 16_384

#: Ranges nested deeper than this on one thread are left out, counted (real programs nest a few dozen deep:
#: modules, ops, the aten ops inside them); without a bound one launch's attribution grows with the input.
MAX_RANGE_DEPTH = 1024
DEEP_RANGES = f"ranges nested deeper than {MAX_RANGE_DEPTH} on one thread, left out"

#: For ops of markers.OUTPUT_OPS under emit_nvtx, a launch's attribution waits until a later op names the shape
#: of this op's output among its inputs (input_op_ids), at most this long in CPU time after the launch: the
#: consumer of an op's output is nearly always the next op.
OUTPUT_WAIT_NS = 20_000_000


@dataclass
class Stats:
    """Counts reported on stderr at the end of a parse."""

    records: int = 0
    kernels: int = 0
    kernels_with_op: int = 0
    bprop_kernels: int = 0  # kernels of backward work (the direction of their ranges says bprop)
    bprop_numbered: int = 0  # of those, kernels in a numbered autograd node: the ones that can have a forward op
    bprop_with_fwd: int = 0
    recompute_kernels: int = 0  # kernels of forward ops recomputed during backward (activation checkpointing)
    no_launch: int = 0  # activities whose launch call is not in the export (time-windowed captures)
    graph_kernels: int = 0  # kernels replayed from a CUDA graph (nsys --cuda-graph-trace=node)
    graph_kernels_tied: int = 0  # of those, kernels given the ranges around their graph node's capture
    graph_launch_kernels: int = 0  # kernels of a graph launch whose graph node the profile does not name
    # of those, the kernels a reader that ties replays to their capture by order (kineto_graphs) left untied, by why
    graph_untied: dict = field(default_factory=dict)
    graph_captured: int = 0  # work calls made during a graph capture in the trace: they ran nothing (kineto_graphs)
    memory_events: int = 0  # allocations and frees, in memory lines after the records (record.SIDE_KEY)
    kernel_launches: int = 0  # kernel launch calls (the window lines' launches), whether or not their GPU side is in
    # an nsys export parsed on the pure-Python path because the compiled core was never built (no C compiler or no
    # sqlite3.h at install): the same output, several times slower, which the user may want to know
    core_missing: bool = False
    oddities: dict = field(default_factory=dict)  # what of the input was left out or read differently -> count


class Attribution:
    """What the enclosing ranges of one launch say; shared by every launch with the same context."""

    # The record's attribution fields (record.ATTRIBUTION), then the sweep's own bookkeeping.
    __slots__ = ATTRIBUTION + ("call", "until_ns", "info", "waiting")

    def __init__(self) -> None:
        self.ranges: list = []
        self.range_ns: list = []  # push and pop of each of ranges, flat: what draws them where they ran
        self.layer: list = []
        self.trace: list = []
        self.marker: list = []
        self.reprMarkers: list = []
        self.seqMarker: list = []
        self.seqId: list = []
        self.altSeqId: list = []
        self.dir = ""
        self.recompute = False  # a forward op run again inside backward work (activation checkpointing)
        self.mod: list = []
        self.op: list = []
        self.args = "[]"  # JSON: the first op marker's Marker.args_json()
        self.outputs: list = []  # shapes of the op's outputs by number, [] where unknown (markers.OUTPUT_OPS)
        self.waiting = False  # its op's output shape may still be named by a consumer op (see Correlator.sweep)
        self.callsite: str | None = None
        self.host_ns: int | None = None  # the CPU duration of op[0]'s range
        self.fwd: str | None = None  # JSON of the forward link (encode.forward_link)
        self.call: int | None = None  # id of the op call (the range standing for it): subSeqId counts per call
        self.until_ns = 0  # the earliest end among its ranges: valid for launches that end before it
        self.info: tuple | None = None  # ((number, record fields), call id, flags) for LAUNCH_INFO, built once


_EMPTY = Attribution()
_BACKWARD_BARE = Attribution()  # a launch on the autograd engine's thread outside every range
_BACKWARD_BARE.dir = "bprop"


_UNDECODED = object()


class _EngineSeq(NamedTuple):
    """An engine range not decoded yet, and the seq of the node it runs (Correlator._name_engine_range)."""

    seq: int


class Correlator:
    """Attributes one source's launch calls to their ranges; iterate :meth:`launch_infos` once."""

    #: What the compiled core's range feed needs to name engine ranges as _name_engine_range does (native.RangeFeed).
    ENGINE_TYPES = (mk.Marker, _EngineSeq, _UNDECODED)

    def __init__(self, source: Source, oddities: dict | None = None):
        self.source = source
        self.oddities = {} if oddities is None else oddities  # what was left out of the input, and how often
        self._stacks: dict = {}  # thread -> list of open range rows, outermost first
        # Per open range row, by id (the row is alive while it is on a stack; the entry goes when it is
        # popped): [decoded marker, attribution of launches directly inside it, its op call's counter].
        self._state: dict = {}
        # (process, seq) -> a copy of the stack at that forward range (a list), or the JSON of its forward link once
        # a backward node asked; oldest first, the newest FWD_MEMORY_OPS at least.
        self._fwd = BoundedDict(2 * FWD_MEMORY_OPS)
        # (process, op_id) -> attributions whose op waits for a consumer to name its output's shape
        self._wanted: dict = {}
        self._calls = itertools.count(1)
        # thread -> whether its first numbered range was backward work: the autograd engine's own thread, whose ops
        # outside any node (adding up the gradients of a tensor used twice) are backward work too.
        self._backward_thread: dict = {}
        self._decoded = source.ranges_decoded  # rows carry a Marker (activities.RANGE_ROW)
        self._process_of = source.process_of
        # (attribution, a launch's own site) -> the attribution with that callsite (Source.launch_sites)
        self._sited = BoundedDict(2 * FWD_MEMORY_OPS) if source.launch_sites else None
        # id of a range row -> (the row, its decoded autograd marker): a forward op's ranges, decoded when its own
        # launches were attributed, are not decoded again when a backward node links to it (the row is kept, so its
        # id is not reused). pyprof's markers are cached by text already (markers.decode); engine ranges are left
        # out: their marker takes the seq of the node inside (_EngineSeq); so are backward nodes, which no link reads
        # (a sixth of the entries on the 50k-kernel training exports; a recomputed op's stack may hold one, decoded
        # again then). A link older than the cache decodes again.
        self._markers = BoundedDict(2 * DECODED_MARKERS)

    # -- the sweep -------------------------------------------------------------------------------
    def _push(self, row: tuple) -> None:
        stacks = self._stacks
        thread = row[0]
        st = stacks.get(thread)
        if st is None:
            st = stacks[thread] = []
        start = row[1]
        if st and st[-1][2] <= start:
            state = self._state
            while st and st[-1][2] <= start:
                state.pop(id(st.pop()), None)
        if len(st) >= MAX_RANGE_DEPTH:
            self.oddities[DEEP_RANGES] = self.oddities.get(DEEP_RANGES, 0) + 1
            return
        if st and st[-1][1] == start and st[-1][2] < row[2]:
            # Readers order ranges by start only (equal starts come in the order stored): a range that
            # starts with the ones just pushed but ends later encloses them. Those of equal start are ordered
            # by end, the latest first: the place is found by bisection (a scan was quadratic in the nesting).
            lo, hi, end = 0, len(st) - 1, row[2]
            while lo < hi:
                mid = (lo + hi) // 2
                if st[mid][1] == start and st[mid][2] < end:
                    hi = mid
                else:
                    lo = mid + 1
            st.insert(lo, row)
            depth = lo + 1
        else:
            st.append(row)
            depth = len(st)
        # The autograd sequence number of a forward range, looked for on every range: texts are searched,
        # not decoded, because most ranges never enclose a launch.
        m = row[5] if self._decoded else None
        if m is not None:
            seq = m.seq if m.kind == mk.SEQ and not m.backward else None
            if thread not in self._backward_thread and m.kind == mk.SEQ and (m.backward or seq is not None):
                self._backward_thread[thread] = m.backward
        else:
            text = row[3]
            seq = None
            if self._wanted and text and ", input_op_ids = " in text:
                self._take_output_shapes(row)
            if text and ", seq = " in text:
                seq = quick_seq(text)
                if seq is None and mk.is_backward_text(text):
                    self._backward_thread.setdefault(thread, True)
                    self._name_engine_range(st, row)
                elif seq is not None and thread not in self._backward_thread:
                    self._backward_thread[thread] = False
        if seq is not None and depth > 1:
            parent = st[depth - 2][3]
            if parent and parent.startswith(mk.ENGINE_PREFIX):
                # The engine's range holds the node it runs, with the node's number: a range right inside it is
                # that node under whatever name (a C++ custom Function's is "CppNode<...>"), never a forward op.
                seq = None
        if seq is not None:
            # Sequence numbers count per thread: a forward op run on the engine's thread (a recomputed one) may
            # carry the number of another op of the main thread. Which side a node looks on: _forward_link.
            key = (self._process_of(thread), seq, self._backward_thread.get(thread) is True)
            fwd = self._fwd
            prev = fwd.get(key)
            # An op records the sequence number the next autograd node will get, so a no-grad op just
            # before the one that creates the node carries the same seq (BatchNorm's num_batches_tracked
            # += 1, slicing before an embedding): the node belongs to the last op with that seq. An op
            # nested in the previous holder (aten::convolution inside aten::conv2d) is part of it.
            # "Nested in": the holder is on this thread and its span holds this range's (ranges nest).
            if prev is None:
                fwd.add(key, st[:depth])
            elif type(prev) is list and not (
                    prev[-1][0] == thread and prev[-1][1] <= start and prev[-1][2] >= row[2]):
                del fwd[key]  # re-inserted: the newest again
                fwd.add(key, st[:depth])

    def _take_output_shapes(self, row: tuple) -> None:
        """A consumer op's inputs name the shapes of waiting producers' outputs: give them to their attributions."""
        text = row[3]
        process = self._process_of(row[0])
        wanted = self._wanted
        if not any((process, int(p)) in wanted for p, _ in mk.INPUT_PAIR.findall(text, text.find(", input_op_ids = "))):
            return
        m = mk.decode(text)
        if m is None:
            return
        for producer, number, shape in mk.input_shapes(m):
            waiting = wanted.pop((process, producer), None)
            for a in waiting or ():
                if a.info is None and number >= 0:
                    a.outputs = a.outputs + [[]] * (number + 1 - len(a.outputs)) if len(a.outputs) <= number \
                        else list(a.outputs)
                    a.outputs[number] = shape
                a.waiting = False

    def _name_engine_range(self, st: list, row: tuple) -> None:
        """Give the engine's ``evaluate_function: XBackward0`` range around a node the node's ``seq``.

        The engine runs work of its own for a node after the node's range has closed (reducing a
        broadcast bias gradient, say): such kernels sit in the engine range alone, which names the node
        but carries no ``seq``. The node's range, pushed just inside it, does. Names are compared as text
        and the engine range is decoded only if a launch needs it: this runs for every backward node."""
        i = st.index(row)
        if i == 0:
            return
        parent = st[i - 1]
        text = parent[3]
        if not text or not text.startswith(mk.ENGINE_PREFIX):
            return
        node = row[3]
        cut = node.find(", ")
        name = node[:cut] if cut >= 0 else node
        after = len(mk.ENGINE_PREFIX) + len(name)
        if not text.startswith(name, len(mk.ENGINE_PREFIX)) or text[after:after + 2] not in ("", ", "):
            return
        seq = mk.quick_seq(node, backward=True)
        if seq is None:
            return
        s = self._state.get(id(parent))
        if s is None:
            s = self._state[id(parent)] = [_UNDECODED, None, None]
        if isinstance(s[0], mk.Marker):
            s[0].seq = seq
        else:
            s[0] = _EngineSeq(seq)  # applied when a launch decodes the range
        s[1] = None  # a launch seen before the node's range was attributed without the seq

    def _launch_attribution(self, thread: object, start_ns: int, end_ns: int) -> Attribution:
        st = self._stacks.get(thread)
        if not st:
            return _BACKWARD_BARE if self._backward_thread.get(thread) else _EMPTY
        state = self._state
        while st and st[-1][2] < start_ns:
            state.pop(id(st.pop()), None)
        if not st:
            return _BACKWARD_BARE if self._backward_thread.get(thread) else _EMPTY
        top = st[-1]
        s = state.get(id(top))
        if s is not None and s[1] is not None and s[1].until_ns >= end_ns:
            return s[1]
        chain = [row for row in st if row[2] >= end_ns]
        if not chain:  # the call ends after every open range (a broken end time): no range encloses it
            return _BACKWARD_BARE if self._backward_thread.get(thread) else _EMPTY
        info = self._attribute(chain)
        if len(chain) == len(st):  # else a range of another domain closed inside: do not cache
            if s is None:
                s = state[id(top)] = [_UNDECODED, None, None]
            s[1] = info
        return info

    def _call_id(self, row: tuple) -> int:
        """A number for the op call a range stands for (ids of rows are reused once they are freed)."""
        s = self._state.get(id(row))
        if s is None:
            s = self._state[id(row)] = [_UNDECODED, None, None]
        if s[2] is None:
            s[2] = next(self._calls)
        return s[2]

    def _attribute(self, chain: list, counters: bool = True) -> Attribution:
        """The attribution of a launch enclosed by ``chain`` (outermost first).

        ``counters``: give the op call an id for subSeqId and link backward work to its forward op. A forward
        link's own attribution is built without (it needs only the forward op's names): no link is followed from
        inside another, so resolving one never recurses, whatever the sequence numbers say."""
        a = Attribution()
        a.until_ns = min(row[2] for row in chain)
        ranges = a.ranges
        range_ns = a.range_ns
        for row in chain:
            range_ns += (row[1], row[2])
        ops: list = []  # (marker, row, index in chain), for each kind of marker
        fwd_seq: list = []
        bwd_seq: list = []
        state = self._state
        decoded = self._decoded
        # The previous range is the engine's: a numbered range right inside it is the node the engine runs, whatever
        # its name (the engine's own work after the node, such as a bias gradient's sum, is not numbered).
        in_engine = False
        for i, row in enumerate(chain):
            text = row[3]
            node, in_engine = in_engine, bool(text) and text.startswith(mk.ENGINE_PREFIX)
            m = row[5] if decoded else None
            if m is None:
                if not text:
                    ranges.append("")
                    continue
                if counters:  # decoded once per open range (a parent is shared by its children's launches)
                    s = state.get(id(row))
                    if s is None:
                        m = mk.decode(text)
                        state[id(row)] = [m, None, None]
                        if m is not None and m.kind == mk.SEQ and not in_engine and not m.backward:
                            self._markers.add(id(row), (row, m))
                    elif s[0] is _UNDECODED:
                        m = s[0] = mk.decode(text)
                        if m is not None and m.kind == mk.SEQ and not in_engine and not m.backward:
                            self._markers.add(id(row), (row, m))
                    elif type(s[0]) is _EngineSeq:
                        seq = s[0].seq
                        m = s[0] = mk.decode(text)
                        if m is not None:
                            m.seq = seq
                    else:
                        m = s[0]
                else:
                    known = self._markers.get(id(row))
                    m = known[1] if known is not None and known[0] is row else mk.decode(text)
                if m is None:
                    ranges.append(text)
                    continue
            kind = m.kind
            ranges.append(_range_name(m, text))
            if kind == mk.SEQ:
                (bwd_seq if m.backward or (node and m.seq is not None) else fwd_seq).append((m, row, i))
            elif kind == mk.OP:
                ops.append((m, row, i))
                if m.stack:
                    a.trace.extend(m.stack)
                elif m.site:
                    a.trace.append(m.site)
            elif kind == mk.MODULE or kind == mk.LAYER:
                a.layer.append(m.name)
            elif kind == mk.TRACE:
                a.trace.extend(m.stack or ())
            elif kind == mk.REPR:
                a.reprMarkers.append(m.data)
        if bwd_seq:
            inner = bwd_seq[-1][2]
            if any(i > inner and _numbered_in_backward(m) for m, _, i in fwd_seq):
                # A numbered forward op inside backward work: autograd numbers ops only while grad is enabled,
                # which during a backward pass means activation checkpointing running forward ops again. They are
                # forward ops of their own (their own backward nodes link to them), recomputed.
                a.recompute = True
                ops = [x for x in ops if x[2] > inner]
                fwd_seq = [x for x in fwd_seq if x[2] > inner]
                bwd_seq = []
        engine_thread = self._backward_thread.get(chain[0][0]) is True
        # In backward work an op's seq of 0 is no number (_numbered_in_backward), nor a seqId (the original PyProf
        # left it out too); a node's own number is one, 0 included.
        nodes = {i for _, _, i in bwd_seq}
        for m, row, i in sorted(fwd_seq + bwd_seq, key=_chain_index):
            a.seqMarker.append(row[3] or m.name)
            if m.seq is not None and m.seq not in a.seqId and (
                    i in nodes or not (bwd_seq or engine_thread) or _numbered_in_backward(m)):
                a.seqId.append(m.seq)
            if m.stashed is not None:
                a.altSeqId.append(m.stashed)
        # The arguments are the record's ``args`` (op[0]'s); a marker repeats only who and where.
        a.marker = [m.lean_json(row[4]) for m, row, _ in ops]
        named = ops or [x for x in fwd_seq if not x[0].container] or [x for x in bwd_seq if not x[0].container] \
            or fwd_seq or bwd_seq
        engine_work = not bwd_seq and not a.recompute and engine_thread \
            and not any(_numbered_in_backward(x[0]) for x in fwd_seq)
        if not named:
            if engine_work:
                a.dir = "bprop"
            return a  # plain user ranges: no op (nor direction, off the engine's thread)
        # Work inside ``Tensor.backward`` but in no node (the gradient seed ``ones_like`` on the calling thread) is a
        # forward op's, as the original PyProf said: direction is that of the autograd node around a kernel.
        a.dir = "bprop" if bwd_seq or engine_work or any(_backward_graph(x[0]) for x in ops) else "fprop"
        a.mod = [x[0].mod for x in named]
        a.op = [x[0].op for x in named]
        first = named[0][0]
        # An op range that records no arguments (Nsight Systems' functions-trace names a Python function only)
        # takes them from the first autograd range inside it that has them (emit_nvtx's sizes): the same call.
        shaped = first if first.args is not None or first.raw_sizes is not None or first.kind != mk.OP else next(
            (m for m, _, _ in fwd_seq if m.raw_sizes is not None or m.args is not None), first)
        a.args = shaped.args_json()
        if shaped.outputs:
            a.outputs = shaped.outputs
        # A recorded call stack holds torch's frames too (apex.pyprof's traceMarker): the call site is the user's line.
        a.callsite = first.site or (user_site(first.stack) if first.stack else None)
        if a.callsite is None and ops and a.trace:
            a.callsite = user_site(a.trace)
        start, end = named[0][1][1], named[0][1][2]
        if type(start) is int and type(end) is int and end >= start:
            a.host_ns = end - start
        if counters:
            # A compiled backward graph runs in one autograd node; each of its kernels is a call of its own (its range).
            own = bwd_seq and ops and ops[-1][0].mod == COMPILED_MOD
            a.call = self._call_id(_node_call(chain, bwd_seq[-1][2]) if bwd_seq and not own else named[0][1])
            if bwd_seq:
                a.fwd = self._forward_link(bwd_seq)
            elif first.kind == mk.SEQ and first.op_id is not None and type(first.raw_sizes) is str \
                    and mk.OUTPUT_OPS.search(first.op):
                # emit_nvtx with shapes: stride and padding are not recorded, the output's shape will be.
                a.waiting = True
                self._wanted.setdefault((self._process_of(named[0][1][0]), first.op_id), []).append(a)
        return a

    def _forward_link(self, bwd_seq: list) -> str | None:
        """JSON of the forward op of the innermost numbered backward range, or None when none is remembered.

        Sequence numbers count per thread, so one number may name a forward op of the main thread and one run
        again on the engine's thread (activation checkpointing). A node that runs inside another node (a
        backward pass started from within the backward pass: reentrant checkpointing) was made by the engine's
        thread: it looks there first; any other node was made by a forward pass: it looks on the other threads
        first."""
        nested = len({m.seq for m, _, _ in bwd_seq if m.seq is not None}) > 1 or \
            sum(1 for _, row, _ in bwd_seq if row[3] and row[3].startswith(mk.ENGINE_PREFIX)) > 1
        for m, row, _ in reversed(bwd_seq):
            if m.seq is None:
                continue
            process = self._process_of(row[0])
            for on_engine in ((True, False) if nested else (False, True)):
                key = (process, m.seq, on_engine)
                f = self._fwd.get(key)
                if f is None:
                    continue
                if type(f) is list:
                    # a stack snapshot: attributed once (without links of its own); what is kept is the link's JSON,
                    # all a later node with this seq takes of it (the Attribution, lists and all, is 3-4x the size)
                    a = self._attribute([r for r in f if r[2] >= f[-1][2]], counters=False)
                    f = self._fwd[key] = encode.forward_link(a.mod[0] if a.mod else "", a.op[0] if a.op else "",
                                                             a.args, a.callsite, a.layer, m.seq)
                return f
        return None

    # -- what the sweep hands on -----------------------------------------------------------------
    def launch_infos(self) -> Iterator[tuple]:
        """Sweep ranges and launch calls; yield one model.LAUNCH_INFO tuple per launch, in launch start order.

        Everything a record needs from the launch and its ranges, already JSON where it is text, so that
        the tuples can cross a process boundary cheaply.
        """
        launches, swept = itertools.tee(self.source.launches())
        for launch, info in zip(launches, self.sweep(swept)):
            yield (launch.key, launch.api, launch.start_ns, launch.end_ns, launch.pid, launch.tid) + info

    def sweep(self, launches: Iterable[tuple]) -> Iterator[tuple]:
        """Yield ``(attribution, call, flags)`` (the end of LAUNCH_INFO) for each launch call, given as a
        tuple that starts ``(thread, start_ns, end_ns)`` (a Launch, or a reader's ``launch_times`` row), in
        launch start order. A sweep worker needs no more of a launch than this (pipeline.py). The compiled core's
        sweep (_core.Sweep, native_lines.record_lines) does the same in C."""
        # The sweep creates millions of small acyclic objects; generational GC passes over them cost more
        # than the parse itself, and there are no cycles to collect. Collection resumes at the end.
        with no_cyclic_gc():
            feed = native.range_feed(self.source, self, DEEP_RANGES, MAX_RANGE_DEPTH) or \
                RowFeed(self.source.ranges(), self._push)
            push_until, ready = feed.push_until, feed.ready
            attribute = self._launch_attribution
            empty = (None, None, 0)
            held: deque = deque()  # (launch start, attribution) behind one that waits for an output shape
            sited = self._sited
            for launch in launches:
                start = launch[1]
                # Hand on what waited long enough before ranges from after its wait are read.
                while held and held[0][0] + OUTPUT_WAIT_NS < start:
                    h = held.popleft()[1]
                    h.waiting = False
                    yield empty if h is _EMPTY else (h.info or _info(h))
                push_until(start)
                ready(launch[0], start)
                a = attribute(launch[0], start, launch[2])
                if sited is not None and a.callsite is None and launch.site is not None and not a.waiting:
                    a = self._with_site(a, launch.site)
                if not held and not a.waiting:
                    if self._wanted:
                        self._wanted.clear()  # what still waits is handed on already: too late for it
                    yield empty if a is _EMPTY else (a.info or _info(a))
                    continue
                held.append((start, a))
                while held and not held[0][1].waiting:
                    h = held.popleft()[1]
                    yield empty if h is _EMPTY else (h.info or _info(h))
            # Ranges after the last launch may still name the shapes that held launches wait for.
            while held and self._wanted and (nxt := feed.next_start()) is not None \
                    and nxt <= held[-1][0] + OUTPUT_WAIT_NS:
                feed.push_one()
            feed.close()
            for _, h in held:
                h.waiting = False
                yield empty if h is _EMPTY else (h.info or _info(h))

    def _with_site(self, a: Attribution, site: str) -> Attribution:
        """``a`` with the calling line of a launch's own Python backtrace as its callsite (where no range named
        one): one copy per (attribution, line), shared by the launches that have both."""
        key = (a, site)
        b = self._sited.get(key)
        if b is None:
            b = copy.copy(a)
            b.callsite = site
            b.info = None
            self._sited.add(key, b)
        return b


def _node_call(chain: list, i: int) -> tuple:
    """The range that stands for the op call of the backward node ``chain[i]``: the engine's
    ``evaluate_function`` range right around it, where there is one, else the node's own range. The engine's own
    work for the node after the node's range has closed (the sum that reduces a broadcast bias's gradient) sits
    in that range alone: it is the node's call too, so its kernels continue the node's subSeqId and call_id."""
    if i:
        text = chain[i - 1][3]
        if text and text.startswith(mk.ENGINE_PREFIX):
            return chain[i - 1]
    return chain[i]


def _numbered_in_backward(m) -> bool:
    """Whether a forward op's range inside backward work (or on the engine's thread) says autograd numbered it.

    The PyTorch of the committed captures (2.x) gives an op's range a ``seq`` only while grad is enabled, so a
    numbered op in backward work is a recomputed one. PyTorch of early 2020 (the apex.pyprof era) gave every op the
    number the thread's next node would get, grad or not: the engine's thread makes no node in a plain backward
    pass, so its ops all say ``seq = 0``. Zero is taken as that, not as a number: the one op it misreads is the first
    recomputed op of a fresh engine thread (whose first node gets 0), in a capture that begins with the program's
    first backward pass. The original PyProf left 0 out of ``seqId`` as well."""
    return m.seq is not None and m.seq != 0


def _backward_graph(m) -> bool:
    """A kernel of a compiled backward graph (pyprof.nvtx.inductor's marker says which graph it came from)."""
    return m.mod == COMPILED_MOD and type(m.data) is dict and m.data.get("graph") == "backward"


class RowFeed:
    """A reader's range rows pushed on a Correlator's stacks by its own ``_push``, as the sweep asks: the pure-Python
    reference of the compiled core's feed (native.RangeFeed), which reads and pushes the same rows in C."""

    def __init__(self, rows: Iterable[tuple], push) -> None:
        self._rows = iter(rows)
        self._push = push
        self._next = next(self._rows, None)

    def push_until(self, start_ns: int) -> None:
        """Push every range that starts at or before ``start_ns``."""
        r, rows, push = self._next, self._rows, self._push
        while r is not None and r[1] <= start_ns:
            push(r)
            r = next(rows, None)
        self._next = r

    def push_one(self) -> None:
        """Push the next range."""
        self._push(self._next)
        self._next = next(self._rows, None)

    def next_start(self) -> int | None:
        """The start of the next range not pushed yet; None after the last."""
        return None if self._next is None else self._next[1]

    def ready(self, thread, start_ns: int) -> None:
        """Nothing to do: ``_push`` keeps the Correlator's stacks itself (the compiled feed's lists wait for this)."""

    def close(self) -> None:
        """Nothing to release: the reader's cursor ends with its rows."""


def _chain_index(x: tuple) -> int:
    return x[2]


def _info(a: Attribution) -> tuple:
    # Plain lists and strings, numbered (model.LAUNCH_INFO): the writer encodes them once per number, and a
    # worker process sends them once (pickling these is cheaper than encoding them, which balances the work
    # of the two processes). What repeats across calls (a marker's arguments) is JSON already, cached.
    fields = _attribution_fields(a)
    # Only backward work that belongs to an autograd node with a sequence number can have a forward op: the
    # engine's AccumulateGrad (adding into .grad) belongs to no forward op, and PyTorch 1.8 numbered no node.
    bprop = a.dir == "bprop"
    flags = (HAS_OP if a.op else 0) | (BPROP if bprop else 0) | (HAS_FWD if a.fwd is not None else 0) | \
        (NUMBERED if bprop and any(s is not None for s in a.seqId) else 0) | (RECOMPUTE if a.recompute else 0)
    a.info = ((next(_serials), fields), a.call, flags)
    return a.info


_serials = itertools.count(1)
_attribution_fields = operator.attrgetter(*ATTRIBUTION)  # in record order, as the writer takes them
_unset = [name for name in ATTRIBUTION if not hasattr(_EMPTY, name)]
if _unset:  # pragma: no cover - a field added to record.FIELDS needs its empty value in Attribution.__init__
    raise ImportError(f"pyprof.parse.attribute.correlate: Attribution.__init__ sets no {', '.join(_unset)}")


HAS_OP, BPROP, HAS_FWD, NUMBERED, RECOMPUTE = 1, 2, 4, 8, 16  # LAUNCH_INFO flags, for the summary's shares


def _range_name(m, text: str) -> str:
    """A range's name in the record's ``ranges``: pyprof's JSON payloads and PyTorch's autograd texts
    shortened to the op or module they name (the details are in ``marker``, ``args`` and ``seqMarker``)."""
    kind = m.kind
    if kind == mk.OP:
        return f"{m.mod}.{m.op}" if m.mod else m.op
    if kind == mk.MODULE:
        return f"module:{m.name}"
    if kind == mk.SEQ:
        return m.name
    return text  # LAUNCH_INFO flags, for the summary's shares
