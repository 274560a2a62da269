"""Attribution, done once for every reader: activity -> launch call -> enclosing ranges -> forward op.

One sweep over ranges and launch calls in start-time order keeps an open-range stack per CPU thread
(a linked list through ``Range.parent``, so a launch's context is the stack top: no copying). A launch
belongs to every push/pop range on its thread that encloses the call, innermost last. The attribution of
a stack top is computed once and shared by every launch made inside it. Backward kernels find their
forward op through the autograd sequence number: the backward node ``XBackward0, seq = N`` links to the
outermost forward range with ``seq = N`` in the same process, whose own enclosing ranges name the op,
its arguments, call site and layer. Forward ranges are always earlier in time than their backward node,
so the same time-ordered sweep has seen them already.
"""
from __future__ import annotations

import gc
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator

from pyprof.common import RECORD_SCHEMA, Record
from pyprof.parse import markers as mk
from pyprof.parse.markers import quick_seq
from pyprof.parse.model import Activity, Launch, Range, Source

#: Forward ranges remembered per process for backward links. A forward pass with more autograd ops
#: than this before its backward loses the links of its oldest ops; bounded so forward-only captures
#: (inference) do not grow without limit.
FWD_MEMORY_OPS = 65_536


@dataclass
class Stats:
    """Counts reported on stderr at the end of a parse."""

    records: int = 0
    kernels: int = 0
    kernels_with_op: int = 0
    bprop_kernels: int = 0
    bprop_with_fwd: int = 0
    no_launch: int = 0  # activities whose launch call is not in the export (time-windowed captures)


class Attribution:
    """What the enclosing ranges of one launch say; shared by every launch with the same context."""

    __slots__ = ("ranges", "layer", "trace", "marker", "reprMarkers", "seqMarker", "seqId", "altSeqId",
                 "dir", "mod", "op", "args", "callsite", "fwd", "call_counter", "json", "until_ns")

    def __init__(self) -> None:
        self.ranges: list = []
        self.layer: list = []
        self.trace: list = []
        self.marker: list = []
        self.reprMarkers: list = []
        self.seqMarker: list = []
        self.seqId: list = []
        self.altSeqId: list = []
        self.dir = ""
        self.mod: list = []
        self.op: list = []
        self.args: list = []
        self.callsite: str | None = None
        self.fwd: dict | None = None
        # Kernel counter of the range standing for one op call (subSeqId). A list shared with that range,
        # not the range itself: range.info -> attribution -> range would be a reference cycle.
        self.call_counter: list | None = None
        self.json: tuple[str, str] | None = None  # encoded fragments, see _fragments
        self.until_ns = 0  # the earliest end among its ranges: valid for launches that end before it


_EMPTY = Attribution()


class Correlator:
    """Joins one source's launches, ranges and activities; iterate :meth:`records` once."""

    def __init__(self, source: Source):
        self.source = source
        self.stats = Stats()
        self._stacks: dict = {}
        self._fwd: OrderedDict = OrderedDict()

    # -- the sweep -------------------------------------------------------------------------------
    def _push(self, r: Range) -> None:
        stacks = self._stacks
        top = stacks.get(r.thread)
        start = r.start_ns
        while top is not None and top.end_ns <= start:
            top = top.parent
        r.parent = top
        stacks[r.thread] = r
        # The autograd sequence number of a forward range, looked for on every range: texts are searched,
        # not decoded, because most ranges never enclose a launch.
        if r.decoded:
            m = r._marker
            seq = m.seq if m is not None and m.kind == mk.SEQ and not m.backward else None
        else:
            text = r.text
            seq = quick_seq(text) if text and ", seq = " in text else None
        if seq is not None:
            key = (r.pid, seq)
            fwd = self._fwd
            if key not in fwd:  # the outermost range with this seq comes first
                fwd[key] = r
                if len(fwd) > FWD_MEMORY_OPS:
                    fwd.popitem(last=False)

    def _launch_attribution(self, thread: object, start_ns: int, end_ns: int) -> Attribution:
        stacks = self._stacks
        top = stacks.get(thread)
        while top is not None and top.end_ns < start_ns:
            top = top.parent
        stacks[thread] = top
        if top is None:
            return _EMPTY
        info = top.info
        if info is not None and info.until_ns >= end_ns:
            return info
        chain = []
        nested = True
        node = top
        while node is not None:
            if node.end_ns >= end_ns:
                chain.append(node)
            else:
                nested = False  # a range of another domain that closed inside this one: skip it
            node = node.parent
        chain.reverse()
        info = self._attribute(chain)
        if nested:
            top.info = info
        return info

    def _range_attribution(self, r: Range) -> Attribution:
        """The attribution a launch made directly inside range ``r`` would get."""
        if r.info is not None and r.info.until_ns >= r.end_ns:
            return r.info
        chain = []
        node: Range | None = r
        while node is not None:
            if node.end_ns >= r.end_ns:
                chain.append(node)
            node = node.parent
        chain.reverse()
        r.info = self._attribute(chain)
        return r.info

    def _attribute(self, chain: list) -> Attribution:
        a = Attribution()
        a.until_ns = min(r.end_ns for r in chain)
        ops: list = []
        fwd_seq: list = []
        bwd_seq: list = []
        for r in chain:
            a.ranges.append(r.text or "")
            m = r.marker
            if m is None:
                continue
            kind = m.kind
            if kind == mk.OP:
                ops.append((m, r))
                data = m.data if r.payload is None else {**m.data, "call": r.payload}
                a.marker.append(data)
                if m.stack:
                    a.trace.extend(m.stack)
                elif m.site:
                    a.trace.append(m.site)
            elif kind == mk.SEQ:
                a.seqMarker.append(r.text or m.name)
                if m.seq is not None and m.seq not in a.seqId:
                    a.seqId.append(m.seq)
                if m.stashed is not None:
                    a.altSeqId.append(m.stashed)
                (bwd_seq if m.backward else fwd_seq).append((m, r))
            elif kind == mk.MODULE or kind == mk.LAYER:
                a.layer.append(m.name)
            elif kind == mk.TRACE:
                a.trace.extend(m.stack or ())
            elif kind == mk.REPR:
                a.reprMarkers.append(m.data)
        bprop = bool(bwd_seq) or any(m.op == "backward" for m, _ in ops)
        named = ops or fwd_seq or bwd_seq
        # Direction is only claimed when an op is known; a kernel under plain user ranges has none.
        a.dir = "bprop" if bprop else ("fprop" if named else "")
        if named:
            a.mod = [m.mod for m, _ in named]
            a.op = [m.op for m, _ in named]
            first = named[0][0]
            a.args = first.get_args()
            a.callsite = first.site or (first.stack[-1] if first.stack else None)
            if a.callsite is None and ops and a.trace:
                a.callsite = a.trace[-1]
            call = bwd_seq[-1][1] if bwd_seq else named[0][1]
            if call.n_sub is None:
                call.n_sub = [0]
            a.call_counter = call.n_sub
        if bwd_seq:
            a.fwd = self._forward_link(bwd_seq)
        return a

    def _forward_link(self, bwd_seq: list) -> dict | None:
        for m, r in reversed(bwd_seq):
            if m.seq is None:
                continue
            f = self._fwd.get((r.pid, m.seq))
            if f is None:
                continue
            fi = self._range_attribution(f)
            return {"mod": fi.mod[0] if fi.mod else "", "op": fi.op[0] if fi.op else "", "args": fi.args,
                    "callsite": fi.callsite, "layer": fi.layer, "seq": m.seq}
        return None

    # -- output ----------------------------------------------------------------------------------
    def joined(self) -> Iterator[tuple]:
        """Yield (activity, launch or None, attribution, subSeqId) in activity start-time order.

        Launches are swept only as far as the activities need (their start plus a skew allowance), and a
        launch is forgotten once its activity is out, so memory holds the launches in flight, not all.
        """
        # The sweep creates millions of small acyclic objects; generational GC passes over them cost more
        # than the parse itself, and there are no cycles to collect (see Attribution.call_counter).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            yield from self._joined()
        finally:
            if gc_was_enabled:
                gc.enable()

    def _joined(self) -> Iterator[tuple]:
        src = self.source
        launch_iter = iter(src.launches())
        ranges = iter(src.ranges())
        pending: dict = {}
        recent: OrderedDict = OrderedDict()  # launches already used: graph launches start many kernels
        r = next(ranges, None)
        nxt = next(launch_iter, None)
        push = self._push
        attribute = self._launch_attribution
        stats = self.stats
        for act in src.activities():
            horizon = act.start_ns + CLOCK_SKEW_NS
            while nxt is not None and nxt.start_ns <= horizon:
                start = nxt.start_ns
                while r is not None and r.start_ns <= start:
                    push(r)
                    r = next(ranges, None)
                pending[nxt.key] = (nxt, attribute(nxt.thread, start, nxt.end_ns))
                nxt = next(launch_iter, None)
            key = act.launch_key
            hit = pending.pop(key, None)
            if hit is not None:
                recent[key] = hit
                if len(recent) > RECENT_LAUNCHES:
                    recent.popitem(last=False)
            else:
                hit = recent.get(key)
            stats.records += 1
            if hit is None:
                stats.no_launch += 1
                launch, a = None, _EMPTY
            else:
                launch, a = hit
            sub = None
            if act.kind == "kernel":
                stats.kernels += 1
                if a.op:
                    stats.kernels_with_op += 1
                if a.dir == "bprop":
                    stats.bprop_kernels += 1
                    if a.fwd is not None:
                        stats.bprop_with_fwd += 1
                counter = a.call_counter
                if counter is not None:
                    sub = counter[0]
                    counter[0] = sub + 1
            yield act, launch, a, sub

    def records(self) -> Iterator[Record]:
        """Yield one Record per activity, in activity start-time order."""
        gpus = _gpu_fields(self.source.gpus())
        for act, launch, a, sub in self.joined():
            yield Record(**record_dict(act, launch, a, sub, gpus))

    def lines(self) -> Iterator[str]:
        """Yield each record as its JSON line (no newline), byte for byte ``Record.to_json()``, faster:
        parts shared by many records (kernel names, launch call, attribution) are encoded once and the
        rest is formatted directly. A test compares every line of every corpus file with ``to_json()``."""
        gpus = {dev: f'"gpu":{_dumps(g.name)},"gpu_props":{_dumps(g.props)}'
                for dev, g in self.source.gpus().items()}
        no_gpu = '"gpu":null,"gpu_props":null'
        names: dict = {}  # (kind, short, long) -> JSON: a few hundred distinct kernels, not a million
        shapes: dict = {}  # (grid, block) -> JSON
        enc = _ENCODER.encode
        for act, launch, a, sub in self.joined():
            key = (act.kind, act.short_name, act.long_name)
            head = names.get(key)
            if head is None:
                head = names[key] = (f'{{"kind":{enc(act.kind)},"kShortName":{enc(act.short_name)},'
                                     f'"kLongName":{enc(act.long_name)},"kDuration":')
            key = (act.grid, act.block)
            shape = shapes.get(key)
            if shape is None:
                shape = shapes[key] = f'"grid":{_ints(act.grid)},"block":{_ints(act.block)}'
            if launch is None:
                pid, call = act.pid, '"api":null,"api_start_ns":null,"api_end_ns":null'
                tid = None
            else:
                pid = launch.pid if launch.pid is not None else act.pid
                tid = launch.tid
                call = (f'"api":{enc(launch.api)},"api_start_ns":{launch.start_ns},'
                        f'"api_end_ns":{launch.end_ns}')
            mid, tail = a.json or _fragments(a)
            start = act.start_ns
            yield (f'{head}{act.end_ns - start},"start_ns":{start},"end_ns":{act.end_ns},'
                   f'"pid":{"null" if pid is None else pid},"tid":{"null" if tid is None else tid},'
                   f'"device":{_i(act.device)},"stream":{_i(act.stream)},"correlation_id":{_i(act.correlation_id)},'
                   f'{shape},"registers":{_i(act.registers)},"static_smem_bytes":{_i(act.static_smem_bytes)},'
                   f'"dynamic_smem_bytes":{_i(act.dynamic_smem_bytes)},{gpus.get(act.device, no_gpu)},{call},'
                   f'"bytes":{_i(act.bytes)},"copy_kind":{enc(act.copy_kind)},{mid},'
                   f'"subSeqId":{"null" if sub is None else sub},{tail}}}')


#: How far a GPU timestamp may run ahead of the launch call's CPU timestamp (clock conversion jitter).
CLOCK_SKEW_NS = 50_000_000
#: Launches kept after their first activity, for the further kernels of a CUDA graph launch.
RECENT_LAUNCHES = 16_384

_ENCODER = json.JSONEncoder(separators=(",", ":"))
_NO_GPU = (None, None)


def _dumps(v) -> str:
    return _ENCODER.encode(v)


def _i(v) -> str:
    """JSON of an int or None (readers give ints for every count and id)."""
    return "null" if v is None else str(v)


def _ints(t) -> str:
    return "[" + ",".join("null" if x is None else str(x) for x in t) + "]"


def _fragments(a: Attribution) -> tuple[str, str]:
    """The attribution's keys before and after subSeqId, encoded once per attribution."""
    frag = a.json
    if frag is None:
        # One encoder call per part: each call builds a C encoder, which costs more than small lists.
        enc = _ENCODER.encode
        frag = a.json = (
            enc({"layer": a.layer, "trace": a.trace, "reprMarkers": a.reprMarkers, "marker": a.marker,
                 "seqMarker": a.seqMarker, "seqId": a.seqId})[1:-1],
            enc({"altSeqId": a.altSeqId, "dir": a.dir, "mod": a.mod, "op": a.op, "args": a.args,
                 "callsite": a.callsite, "fwd": a.fwd, "ranges": a.ranges, "schema": RECORD_SCHEMA})[1:-1])
    return frag


def _gpu_fields(gpus: dict) -> dict:
    return {dev: (g.name, g.props) for dev, g in gpus.items()}


def record_dict(act: Activity, launch: Launch | None, a: Attribution, sub: int | None, gpus: dict) -> dict:
    """The record as a dict with the keys of ``pyprof.common.Record`` in field order (a test checks it)."""
    gpu, props = gpus.get(act.device, _NO_GPU)
    if launch is None:
        pid, tid, api, api_start, api_end = act.pid, None, None, None, None
    else:
        pid = launch.pid if launch.pid is not None else act.pid
        tid, api, api_start, api_end = launch.tid, launch.api, launch.start_ns, launch.end_ns
    return {
        "kind": act.kind, "kShortName": act.short_name, "kLongName": act.long_name,
        "kDuration": act.end_ns - act.start_ns, "start_ns": act.start_ns, "end_ns": act.end_ns,
        "pid": pid, "tid": tid, "device": act.device, "stream": act.stream, "correlation_id": act.correlation_id,
        "grid": act.grid, "block": act.block, "registers": act.registers,
        "static_smem_bytes": act.static_smem_bytes, "dynamic_smem_bytes": act.dynamic_smem_bytes,
        "gpu": gpu, "gpu_props": props, "api": api, "api_start_ns": api_start, "api_end_ns": api_end,
        "bytes": act.bytes, "copy_kind": act.copy_kind,
        "layer": a.layer, "trace": a.trace, "reprMarkers": a.reprMarkers, "marker": a.marker,
        "seqMarker": a.seqMarker, "seqId": a.seqId, "subSeqId": sub, "altSeqId": a.altSeqId, "dir": a.dir,
        "mod": a.mod, "op": a.op, "args": a.args, "callsite": a.callsite, "fwd": a.fwd, "ranges": a.ranges,
        "schema": RECORD_SCHEMA,
    }


def correlate(source: Source) -> tuple[Iterator[Record], Stats]:
    """Return (records in start-time order, the Stats they fill as they are consumed)."""
    c = Correlator(source)
    return c.records(), c.stats


def correlate_lines(source: Source) -> tuple[Iterator[str], Stats]:
    """Return (JSON lines of the records in start-time order, the Stats they fill as they are consumed)."""
    c = Correlator(source)
    return c.lines(), c.stats
