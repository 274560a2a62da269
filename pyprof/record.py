"""The record of one GPU activity, declared once: the table FIELDS below (name, default, which stage fills it,
how it is written). Everything else that knows the record's layout is derived from it when it is imported:
the ``Record`` class, parse's attribution order and the writer's line template (pyprof.parse.write.writer), the keys
and types prof checks (pyprof.prof.load.contract), the defaults readers give a key a record leaves out.

Adding a field is one row here, in the part of the record it belongs to, and the code of the stage that fills
it (a reader for an activity field, pyprof.parse.attribute.correlate for an attribution field); docs/record.md says what
it means. Nothing here imports anything but the standard library.
"""
from __future__ import annotations

import copy
import enum
import json
from dataclasses import dataclass, make_dataclass
from dataclasses import field as dataclass_field
from typing import Any, Callable, Iterable, Iterator

#: Version of the record layout written by ``pyprof.parse``. Bump when a key changes meaning.
#: 1: the first layout. 2: a stream of records ends with parse's end line (end_line). 3: a header line first
#: (header_line: the schema, each GPU's properties once), the raw marker texts only on request, and a new key
#: whose value is its default, or what the record's other keys give (end_ns, smem_bytes), left out of the line
#: (FIELDS; readers put it back). 4: side lines (SIDE_KEY: memory events, host time) between the records and the end line.
RECORD_SCHEMA = 4

#: A record's integers are 64-bit, signed: prof and report read times and counts into int64 arrays (and
#: prof.contract refuses a line with a larger one). parse writes none outside: a reader leaves out a row whose
#: times do not fit, or whose duration (end - start) would not, and drops an id or a count that does not fit
#: as it drops one of the wrong type (docs/robustness.md).
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1

#: The line that ends parse's records of one input: written only once every record is out, so a stream
#: without it was cut short (a parse that failed or was killed part way). Readers skip it.
END_KEY = "pyprof_end"
END_PREFIX = b'{"pyprof_end":'
#: The line that starts parse's records of one input (schema 3 on): the schema, and what is the same for every
#: record of a device (its GPU's properties).
HEADER_KEY = "pyprof_header"
HEADER_PREFIX = b'{"pyprof_header":'

#: A side line (schema 4 on): what the input says besides its GPU activities, after the records and before the
#: end line, ``{"pyprof_side": KIND, ...}``. Record readers skip them; the views that need them read them
#: (docs/record.md). KIND "memory": a run of memory events (allocations and frees) of one process and device, as
#: columns (MEMORY_COLUMNS, memory_line). KIND "host": a run of one process's CPU time in one of
#: HOST_CATEGORIES, as disjoint intervals in time order (host_line). KIND "window": a process's profiled window
#: (window_line). KIND "program": the program's own step times around the capture (program_line).
SIDE_KEY = "pyprof_side"
SIDE_PREFIX = b'{"pyprof_side":'
#: Events per memory line: lines stay small enough to decode in one piece, and few.
MEMORY_RUN = 16_384


@dataclass(frozen=True)
class MemoryColumn:
    """One column of a memory line: a list with one value per event."""

    name: str
    json: str  # "int" or "int?" (null where the input does not say)
    doc: str


#: The columns of a memory line, in order. Besides them a line has ``pid``, ``device`` ("cuda:0", "cpu", "host"),
#: ``level`` (LEVELS) and ``sites``: the distinct attributions of its events (op, dir, recompute, callsite, layer,
#: fwd, as on a record), which ``site`` indexes.
MEMORY_COLUMNS: tuple[MemoryColumn, ...] = (
    MemoryColumn("t_ns", "int", "CPU time of the allocation or free (the clock of the records' api_start_ns)"),
    MemoryColumn("bytes", "int", "bytes allocated (positive) or freed (negative)"),
    MemoryColumn("allocated", "int?", "bytes allocated on the device after the event (allocator level only)"),
    MemoryColumn("reserved", "int?", "bytes the allocator holds from the driver after it (allocator level only)"),
    MemoryColumn("addr", "int?", "the block's address: pairs a free with its allocation"),
    MemoryColumn("site", "int", "index into ``sites``: the ranges enclosing the call that allocated or freed"),
)
#: What a memory line's events count: ``allocator``, tensors in PyTorch's caching allocator (the PyTorch
#: profiler's memory events, with its running totals); ``driver``, memory the process took from or gave back to
#: the CUDA driver (Nsight Systems' --cuda-memory-usage: cudaMalloc and cudaFree, what the caching allocator
#: reserves), whose totals the reader adds up.
LEVELS = ("allocator", "driver")


def memory_line(pid: int | None, device: str, level: str, columns: dict[str, list], sites: list[dict]) -> str:
    """One memory line (no newline) of ``columns`` (name -> list, MEMORY_COLUMNS) and their ``sites``."""
    body = {SIDE_KEY: "memory", "pid": pid, "device": device, "level": level,
            **{c.name: columns[c.name] for c in MEMORY_COLUMNS}, "sites": sites}
    return json.dumps(body, separators=(",", ":"))


#: Intervals per host line.
HOST_RUN = 16_384
#: What a host line's intervals are: the union over a process's threads of its ranges of one kind, or of its CUDA
#: API calls. ``step``: ProfilerStep#N ranges; ``dataloader``: the DataLoader's ``enumerate(DataLoader)#...``
#: ranges (record_function: the PyTorch profiler's events, or NVTX under emit_nvtx / pyprof.init()); ``runtime``:
#: CUDA runtime and driver API calls; ``op``: PyTorch op ranges (pyprof's op markers, aten ops, autograd nodes).
HOST_CATEGORIES = ("step", "dataloader", "runtime", "op")


#: Where a window line's profiled window comes from (window_line's ``source``): the capture's own bounds as the
#: export states them (nsys: ANALYSIS_DETAILS' duration from the session start), the session start to the end of
#: the last CUDA API call (an nsys export without ANALYSIS_DETAILS), the trace's first to last event (Kineto), or
#: the first to the last CUDA API call (nvprof, and nsys where activities lack their launch call). GPU activity
#: outside it widens it (prof's steps).
WINDOW_SOURCES = ("capture", "session to last API call", "trace", "API calls")


#: What a window line's launches mean in an input without a GPU activity (parse's summary and prof's overview say it,
#: launched_no_gpu): the launches' GPU side was not recorded, not a program that used no GPU.
LAUNCHED_NO_GPU = "recorded but no GPU activity: the profiler's GPU (CUPTI) activity was off or lost"


def launched_no_gpu(launches: int) -> str:
    """``N kernel launch(es) recorded but no GPU activity: ...``: the sentence for an input whose launches' GPU
    side is missing."""
    return f"{launches} kernel launch{'' if launches == 1 else 'es'} {LAUNCHED_NO_GPU}"


def window_line(pid: int | None, start_ns: int, end_ns: int, source: str, launches: int) -> str:
    """One window line (no newline): the profiled window of the input that holds one process, where it came from
    (WINDOW_SOURCES), and the process's kernel launch calls (API calls named like ``*Launch*``: cudaLaunchKernel,
    cuLaunchKernel, cudaGraphLaunch, ...), counted whether or not their GPU side was recorded."""
    return json.dumps({SIDE_KEY: "window", "pid": pid, "start_ns": start_ns, "end_ns": end_ns, "source": source,
                       "launches": launches}, separators=(",", ":"))


def host_line(pid: int | None, category: str, start_ns, end_ns, names: list[str] | None = None,
              int_list: Callable[[object], str] | None = None) -> str:
    """One host line (no newline): a process's intervals of one of HOST_CATEGORIES in time order, disjoint but for
    steps, which are kept each as it is and named (``names``, their range texts). ``int_list``: what writes the JSON
    of ``start_ns`` and ``end_ns`` where they are not lists (parse's compiled core, for int64 arrays); the line is
    the same as json's of the lists."""
    body = {SIDE_KEY: "host", "pid": pid, "category": category}
    if int_list is None:
        body.update(start_ns=start_ns, end_ns=end_ns)
        if names is not None:
            body["names"] = names
        return json.dumps(body, separators=(",", ":"))
    named = "" if names is None else ',"names":' + json.dumps(names, separators=(",", ":"))
    return f'{json.dumps(body, separators=(",", ":"))[:-1]},"start_ns":{int_list(start_ns)},' \
           f'"end_ns":{int_list(end_ns)}{named}}}'


#: How a program line's steps were timed (program_line's ``how``; another text, a newer pyprof's, is kept as it is).
PROGRAM_HOW = ("cuda events", "perf_counter")


#: The text that opens pyprof.step()'s program mark (pyprof.nvtx.step_window): a zero-length range in the domain pyprof,
#: ``{"pyprof":1,"program":{...}}`` whose object holds program_line's three fields.
PROGRAM_MARK_PREFIX = '{"pyprof":1,"program":'
#: The text that opens a graph mark (pyprof.nvtx.graphs): the ranges pyprof pushed while a CUDA graph was captured,
#: written when profiling started: ``{"pyprof":1,"graph":N,"tid":T,"ranges":[[push, pop, text, id],...]}``, its
#: int64 payload the clock's reading at the push, the ranges' times on that clock (docs/markers.md, "Graph marks").
GRAPH_MARK_PREFIX = '{"pyprof":1,"graph":'


def program_line(pid: int | None, unprofiled_step_ns: list[int], captured_step_ns: list[int], how: str) -> str:
    """One program line (no newline): the program's own step times in one process, measured around the capture by
    ``pyprof run`` (or ``pyprof.step()``): ``unprofiled_step_ns``, steps that ran with nothing of the capture on,
    and ``captured_step_ns``, the captured steps timed the same way (empty where only the unprofiled ones were
    known), and ``how`` they were timed (starting with one of PROGRAM_HOW)."""
    return json.dumps({SIDE_KEY: "program", "pid": pid, "unprofiled_step_ns": unprofiled_step_ns,
                       "captured_step_ns": captured_step_ns, "how": how}, separators=(",", ":"))

#: Version of the NVTX marker payload written by ``pyprof.init()`` (docs/markers.md).
MARKER_VERSION = 1
#: The ``mod`` of a compiled kernel's marker (pyprof.nvtx.inductor; docs/markers.md, "Compiled kernel ranges"), and
#: the ``op`` prefix of one that fuses element-wise ops and reductions rather than running a matrix op.
COMPILED_MOD = "inductor"
FUSED_PREFIX = "fused:"


class Stage(str, enum.Enum):
    """Which part of parse fills a field."""

    ACTIVITY = "activity"  # the reader, from the GPU activity's row (pyprof.parse.readers.activities.Activity)
    DEVICE = "device"  # the reader, from what the export says about the GPU the activity ran on
    LAUNCH = "launch"  # the reader, from the CPU call that launched it (pyprof.parse.readers.activities.Launch)
    ATTRIBUTION = "attribution"  # pyprof.parse.attribute.correlate, from the ranges enclosing the launch call
    WRITER = "writer"  # the writer itself (the kernel's index in its op call, the call's number, the schema)


class Part(str, enum.Enum):
    """Fields that many records share, which the writer encodes together once and reuses (the hot path of a
    parse writes millions of lines). ``RECORD``: different on nearly every record, formatted each time."""

    NAME = "name"  # the kernel: a few hundred distinct per export
    RECORD = "record"
    PLACE = "place"  # device and stream
    CONFIG = "config"  # launch configuration and the GPU
    LAUNCH = "launch"  # the launch call
    COPY = "copy"  # a memcpy's or memset's size and direction
    ATTRIBUTION = "attribution"  # what the enclosing ranges say: shared by the kernels of one op call
    HEADER = "header"  # written once per input in the header line, not on the records
    DERIVED = "derived"  # never written: what the record's other keys give (Field.derive)


@dataclass(frozen=True)
class Field:
    """One key of the record.

    ``json`` names how parse's writer encodes the value (pyprof.parse.write.encode.ENCODERS): ``str``, ``str?``
    (None allowed), ``int``, ``int?``, ``ints`` (a list of ints or None), ``strings``, ``bool``, ``value`` (any
    JSON), ``nested`` (a list or None), and, for values correlate keeps already encoded, ``json`` (one JSON
    text, None for null) and ``json_items`` (a list of JSON texts). ``always``: written on every line, a key of
    NVIDIA PyProf's dict lines (old scripts index them) or one that differs on nearly every record; any other
    key is left out of a line where its value is the default, and readers put the default back. ``derive``: the
    value the record's other keys give (a function of the record dict; KeyError or TypeError when they do not
    give one): such a key is left out where it equals that, and readers compute it back."""

    name: str
    default: Any
    stage: Stage
    part: Part
    json: str
    always: bool = False
    doc: str = ""
    derive: Callable[[dict], Any] | None = None


_A, _D, _L, _T, _W = Stage.ACTIVITY, Stage.DEVICE, Stage.LAUNCH, Stage.ATTRIBUTION, Stage.WRITER

#: The record, in the order of its keys on a line. docs/record.md describes each field.
FIELDS: tuple[Field, ...] = (
    Field("kind", "kernel", _A, Part.NAME, "str", True, "kernel | memcpy | memset"),
    Field("kShortName", "", _A, Part.NAME, "str", True, "the kernel's bare function name"),
    Field("kLongName", "", _A, Part.NAME, "str", True, "the full demangled signature"),
    Field("kDuration", 0, _W, Part.RECORD, "int", True, "ns, end_ns - start_ns"),
    Field("start_ns", 0, _A, Part.RECORD, "int", True, "GPU start"),
    Field("end_ns", 0, _A, Part.DERIVED, "int", doc="GPU end: start_ns + kDuration",
          derive=lambda d: d["start_ns"] + d["kDuration"]),
    Field("pid", None, _L, Part.RECORD, "int?", True, "launching process (the activity's without a launch row)"),
    Field("tid", None, _L, Part.RECORD, "int?", True, "launching thread"),
    Field("device", None, _A, Part.PLACE, "int?", True),
    Field("stream", None, _A, Part.PLACE, "int?", True),
    Field("correlation_id", None, _A, Part.RECORD, "int?", True, "CUPTI correlation id"),
    Field("grid", (), _A, Part.CONFIG, "ints", True),
    Field("block", (), _A, Part.CONFIG, "ints", True),
    Field("registers", None, _A, Part.CONFIG, "int?", doc="per thread"),
    Field("static_smem_bytes", None, _A, Part.CONFIG, "int?", doc="per block"),
    Field("dynamic_smem_bytes", None, _A, Part.CONFIG, "int?", doc="per block"),
    Field("smem_bytes", None, _A, Part.CONFIG, "int?", doc="per block, static + dynamic",
          derive=lambda d: None if d["static_smem_bytes"] is None or d["dynamic_smem_bytes"] is None else
          d["static_smem_bytes"] + d["dynamic_smem_bytes"]),
    Field("est_occupancy_pct", None, _A, Part.CONFIG, "value", doc="the PyTorch profiler's estimate"),
    Field("gpu", None, _D, Part.CONFIG, "str?", doc="the GPU's name"),
    Field("gpu_props", None, _D, Part.HEADER, "value", doc="the GPU's properties (in the header line)"),
    Field("api", None, _L, Part.LAUNCH, "str?", doc="the CPU call that launched it"),
    Field("api_start_ns", None, _L, Part.LAUNCH, "int?"),
    Field("api_end_ns", None, _L, Part.LAUNCH, "int?"),
    Field("bytes", None, _A, Part.COPY, "int?", doc="memcpy / memset size"),
    Field("copy_kind", None, _A, Part.COPY, "str?", doc="HtoD, DtoH, DtoD, ..."),
    Field("layer", [], _T, Part.ATTRIBUTION, "strings", True),
    Field("trace", [], _T, Part.ATTRIBUTION, "strings", True),
    Field("reprMarkers", [], _T, Part.ATTRIBUTION, "nested", True),
    Field("marker", [], _T, Part.ATTRIBUTION, "json_items", True),
    Field("seqMarker", [], _T, Part.ATTRIBUTION, "strings", True, "raw autograd range texts (parse --raw-markers)"),
    Field("seqId", [], _T, Part.ATTRIBUTION, "ints", True),
    Field("subSeqId", None, _W, Part.RECORD, "int?", True, "index of the kernel in its op call"),
    Field("call_id", None, _W, Part.RECORD, "int?", True,
          "the op call (range) that launched it, numbered per input from 0 in order of first record; null: none"),
    Field("altSeqId", [], _T, Part.ATTRIBUTION, "ints", True),
    Field("dir", "", _T, Part.ATTRIBUTION, "str", True, "fprop | bprop | ''"),
    Field("recompute", False, _T, Part.ATTRIBUTION, "bool", doc="a forward op run again during backward"),
    Field("mod", [], _T, Part.ATTRIBUTION, "strings", True),
    Field("op", [], _T, Part.ATTRIBUTION, "strings", True),
    Field("args", [], _T, Part.ATTRIBUTION, "json", doc="decoded arguments of op[0] (docs/markers.md)"),
    Field("outputs", [], _T, Part.ATTRIBUTION, "nested", doc="shapes of op[0]'s outputs where known"),
    Field("callsite", None, _T, Part.ATTRIBUTION, "str?", doc="the user's file:line that called op[0]"),
    Field("host_ns", None, _T, Part.ATTRIBUTION, "int?", doc="CPU time of op[0]'s range: its call's host time"),
    Field("fwd", None, _T, Part.ATTRIBUTION, "json", doc="bprop: the forward op"),
    Field("ranges", [], _T, Part.ATTRIBUTION, "strings", doc="every enclosing range name, outermost first"),
    Field("range_ns", [], _T, Part.ATTRIBUTION, "ints",
          doc="the push and pop times of each of ranges, flat ([push, pop] per range); null where the input has "
              "none: a replayed CUDA graph node's ranges, pushed at its capture"),
    Field("schema", RECORD_SCHEMA, _W, Part.HEADER, "int", doc="the layout version (in the header line)"),
)

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
#: The attribution fields in record order, without the writer's subSeqId: what correlate hands the writer.
ATTRIBUTION: tuple[str, ...] = tuple(f.name for f in FIELDS if f.stage is Stage.ATTRIBUTION)
#: name -> default, for the keys a schema-3 line leaves out at their default (a mutable default is copied when
#: put back). The header's fields are not among them: a reader takes those from the header line.
OMITTABLE: dict[str, Any] = {f.name: f.default for f in FIELDS
                             if not f.always and f.derive is None and f.part is not Part.HEADER}
#: name -> its derivation, for the keys a schema-3 line leaves out where the record's other keys give them.
DERIVED: dict[str, Callable[[dict], Any]] = {f.name: f.derive for f in FIELDS if f.derive is not None}


def _runs() -> tuple[tuple[Part, tuple[Field, ...]], ...]:
    out: list = []
    for f in FIELDS:
        if f.part is Part.HEADER or f.part is Part.DERIVED:
            continue
        if out and out[-1][0] is f.part and f.part is not Part.RECORD:
            out[-1][1].append(f)
        else:
            out.append((f.part, [f]))
    return tuple((part, tuple(fields)) for part, fields in out)


#: The line's layout: runs of consecutive fields of one part, in order (a RECORD field is a run of its own).
#: The writer formats a RECORD run per line and encodes any other run once per distinct value.
LINE_RUNS = _runs()


def defaults_of(d: dict) -> None:
    """Put back into the record dict ``d`` every key a schema-3 line leaves out (in place): at its default, or
    computed from the record's other keys (DERIVED; the default where they do not give a value)."""
    for name, default in OMITTABLE.items():
        if name not in d:
            d[name] = copy.copy(default) if type(default) in (list, dict) else default
    derived(d)


def derived(d: dict) -> None:
    """Put back into ``d`` the DERIVED keys it lacks, where its other keys give them (in place). Where they
    do not (absent, as on an original PyProf dict line, which has no times, or of the wrong type, which the
    reader that checks types names), the key stays absent, as any key written on every line that a line lacks."""
    for name, derive in DERIVED.items():
        if name not in d:
            try:
                d[name] = derive(d)
            except (KeyError, TypeError):
                pass


def _record_methods() -> dict:
    def to_dict(self) -> dict:
        """Return the record as a plain dict (tuples become lists in JSON)."""
        return {name: getattr(self, name) for name in FIELD_NAMES}

    def to_json(self) -> str:
        """Return the record as one compact JSON line (no trailing newline), every key written."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict):
        """Build a record from a dict, ignoring unknown keys (newer writers) and defaulting missing ones (older
        writers, and the keys a schema-3 line leaves out; DERIVED ones computed). Raises TypeError on a
        non-dict."""
        if not isinstance(d, dict):
            raise TypeError(f"record must be a JSON object, got {type(d).__name__}")
        known = {k: v for k, v in d.items() if k in BY_NAME}
        derived(known)
        return cls(**known)

    return {"to_dict": to_dict, "to_json": to_json, "from_dict": from_dict,
            "__doc__": "One GPU activity (kernel, memcpy or memset) with everything known about what launched it; "
                       "its fields are FIELDS (docs/record.md)."}


def _dataclass_field(f: Field):
    if isinstance(f.default, (list, dict)):
        empty = type(f.default)
        return dataclass_field(default_factory=empty)
    return dataclass_field(default=f.default)


#: One GPU activity: a dataclass with the fields of FIELDS, in their order.
Record = make_dataclass("Record", [(f.name, Any, _dataclass_field(f)) for f in FIELDS], slots=True,
                        namespace=_record_methods())
Record.__module__ = __name__


def end_line(records: int) -> str:
    """Parse's end line for a run of ``records`` records (no newline)."""
    return f'{{"{END_KEY}":true,"schema":{RECORD_SCHEMA},"records":{records}}}'


#: What the header's ``dist`` says of the input's place in a distributed job (the PyTorch profiler's
#: ``distributedInfo``): key -> the JSON kinds it may hold. A reader ignores other keys; any of these may be null.
DIST_KEYS = {"rank": "int", "world_size": "int", "backend": "str"}


def header_line(gpus: dict, dist: dict | None = None) -> str:
    """Parse's header line (no newline): the schema, and per device id ``{"gpu": name, "gpu_props": {...}}``;
    ``"*"`` for the GPU of records whose device the export does not describe. ``dist`` (DIST_KEYS), where the
    input is one rank of a distributed job, is written as the header's ``dist`` key; without it there is none."""
    body = {HEADER_KEY: True, "schema": RECORD_SCHEMA, "gpus": gpus}
    if dist is not None:
        body["dist"] = dist
    return json.dumps(body, separators=(",", ":"))


def read_lines(lines: Iterable[str | bytes]) -> Iterator[dict]:
    """Each record of parse's output ``lines`` (text or bytes, with or without newlines) as a dict with every key:
    parse's header and end lines skipped, the keys a schema-3 line leaves out at their default put back, and
    ``gpu_props`` from the header by the record's device; side lines skipped. Blank lines are skipped; nothing is type-checked
    (prof's reader checks). Raises ValueError for a line that is not JSON."""
    gpus: dict = {}
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        if not line.strip():
            continue
        d = json.loads(line)
        if HEADER_KEY in d:
            gpus = {dev: g.get("gpu_props") for dev, g in d.get("gpus", {}).items()}
            continue
        if END_KEY in d or SIDE_KEY in d:
            continue
        if "gpu_props" not in d:
            d["gpu_props"] = gpus.get(str(d.get("device")), gpus.get("*"))
        defaults_of(d)
        yield d
