"""Records out: activities joined to the sweep's launch infos, written as JSON lines.

The sweep (correlate) yields one LAUNCH_INFO per launch call in launch order; this module reads the
activities in start order alongside and joins them on the launch key. On a machine with two cores or more
and a large export, the sweep runs in a worker process (pipeline.py) while this process reads the
activities and writes the lines: the two halves of the work are about equal.

The writer is the hot path of a parse (one line per kernel, millions of them): parts that many records
share (kernel names, launch configuration, GPU, attribution) are encoded once, the rest is formatted
directly. Its output is byte for byte ``Record.to_json()``: a test checks every line of every corpus file.
"""
from __future__ import annotations

import itertools
import json
import os
from typing import Iterator

from pyprof.common import BoundedDict, no_cyclic_gc
from pyprof.record import ATTRIBUTION, PROGRAM_MARK_PREFIX, SIDE_PREFIX, Record, program_line, window_line
from pyprof.parse.write import encode, native, native_lines
# CLOCK_SKEW_NS, RECENT and header are the writer's as before (bench/parse_speed.py, prof's per-kernel reader).
from pyprof.parse.write.lineparts import (API_END_KEY, API_JSON, CLOCK_SKEW_NS, LINE, NO_CALL, RECENT, _LAUNCH, _NAME,
                                    _PLACE, header, no_gpu_name, shape_parts)
from pyprof.parse.attribute.correlate import BPROP, HAS_FWD, HAS_OP, NUMBERED, RECOMPUTE, Correlator, Stats
from pyprof.parse.readers.activities import GRAPH_LAUNCH_APIS, Source, attribution_window
from pyprof.parse.readers.nsys import NsysSource
from pyprof.parse.side.host import lines_of as host_lines_of, packed as host_packed
from pyprof.parse.side.memory import memory_lines

_SIDE_TEXT = SIDE_PREFIX.decode()
#: Exports smaller than this are swept in-process: a worker process is not worth starting.
WORKER_MIN_BYTES = 16 << 20
#: The free cores the compiled core's sweep worker needs to pay off: the core alone keeps about 1.4 busy (its
#: reading threads), and on 2 cores a 50k-kernel export parsed no faster with the worker (0.71-0.77 s against
#: 0.74-0.76 s): the two processes only took turns.
CORE_WORKER_CORES = 3
#: What :func:`text` puts in one str, about: writing the 61k lines of a 50k-kernel export one by one took 0.034 s of
#: CPU, in pieces of 256 kB 0.006 s (TextIOWrapper's work is per write), and the core made a str of each line too.
PIECE_CHARS = 1 << 18


def lines(source: Source, worker: bool | None = None, raw_markers: bool = False) -> tuple[Iterator[str], Stats]:
    """Return (parse's header line, then the records' JSON lines in activity start order, then the side lines, each
    without its newline; their Stats). The end line is the caller's to write (record.end_line), once the lines are
    consumed.

    ``worker``: sweep in a worker process (None: when a core is free, the source can be reopened there and the file
    is large), on either path. ``raw_markers``: keep the raw autograd range texts (``seqMarker``). The Stats fill
    in as the lines are consumed."""
    return _output(source, worker, raw_markers, 0)


def text(source: Source, worker: bool | None = None, raw_markers: bool = False) -> tuple[Iterator[str], Stats]:
    """Return (the lines of :func:`lines`, each ended by its newline, several to a str of about PIECE_CHARS: what
    parse writes; their Stats), as :func:`lines` says."""
    return _output(source, worker, raw_markers, PIECE_CHARS)


def _output(source: Source, worker: bool | None, raw_markers: bool, piece_chars: int) -> tuple[Iterator[str], Stats]:
    """:func:`lines` (``piece_chars`` 0) or :func:`text`."""
    compiled = native_lines.takes(source)  # the core reads, sweeps and writes the whole file (native_lines.py)
    if worker is None:
        worker = _worth_a_worker(source, CORE_WORKER_CORES if compiled else 1)
    if compiled:
        if worker:  # imported only here (as in native_lines): most parses fork no worker
            from pyprof import forked

            worker = forked.available()
        stats = _stats(source)
        records = native_lines.record_lines(source, stats, raw_markers, worker, piece_chars)
        return _merge(source, records, stats, piece_chars), stats
    if worker and source.reopen_args() is not None:  # Kineto traces are read in memory
        from pyprof.parse.attribute.sweep_worker import launch_infos_from_worker

        stats = _stats(source)
        infos = launch_infos_from_worker(source, stats.oddities)
    else:
        stats = _stats(source)
        infos = Correlator(source, stats.oddities).launch_infos()
    stats.core_missing = native.not_built() and isinstance(source, NsysSource)  # the core reads nsys exports
    records = _merge_lines(source, infos, stats, raw_markers)
    return _merge(source, _pieces(records, piece_chars) if piece_chars else records, stats, piece_chars), stats


def records(source: Source, worker: bool | None = None) -> tuple[Iterator[Record], Stats]:
    """Return (one Record per activity in start order, their Stats): the JSON lines, decoded."""
    out, stats = lines(source, worker)
    header = json.loads(next(out))
    return (_with_header(json.loads(line), header) for line in out if not line.startswith(_SIDE_TEXT)), stats


def _with_header(d: dict, header: dict) -> Record:
    gpus = header["gpus"]
    gpu = gpus.get(str(d.get("device")), gpus.get("*"))
    return Record.from_dict({**d, "gpu_props": gpu["gpu_props"] if gpu else None})


def _worth_a_worker(source: Source, free_cores: int = 1) -> bool:
    """A worker pays off with ``free_cores`` to spare and a large file; without them the pickling between the two
    processes only adds work (the output is the same either way: a test checks it)."""
    args = source.reopen_args()
    cores = os.cpu_count() or 1
    if args is None or cores - os.getloadavg()[0] < free_cores:
        return False
    try:
        return os.path.getsize(args[1]) >= WORKER_MIN_BYTES
    except OSError:
        return False


def _merge(source: Source, record_lines: Iterator[str], stats: Stats, piece_chars: int) -> Iterator[str]:
    """The header and record lines (the Python path's _merge_lines or the compiled core's), then the side lines (in
    pieces where ``piece_chars``: the records' lines come so then)."""
    # The host intervals are read first, though written last: reading them peaks at a few hundred MB on a
    # 1M-kernel export, and the records' own peak then comes on top of the merged intervals only, never on top of
    # the memory the records' phase keeps for reuse. They are packed before the records' phase forks its sweep
    # worker (host.packed: half the memory).
    host = host_packed(source.host_intervals())
    with no_cyclic_gc():  # only acyclic tuples and strings are made here; see Correlator.launch_infos
        yield from record_lines
    # After the records: side lines, which the memory and host views read and every other reader skips (record.SIDE_KEY).
    side = itertools.chain(memory_lines(source, stats), host_lines_of(host),
                           _window_lines(source, stats), _program_lines(source))
    yield from _pieces(side, piece_chars) if piece_chars else side


def _window_lines(source: Source, stats: Stats) -> Iterator[str]:
    """A window line per process with a CUDA API call (record.window_line), once the records are out: whether some
    activity lacked its launch call (a cut capture, whose stated bounds are not trusted) is known only then."""
    launches = source.kernel_launches()
    stats.kernel_launches = sum(launches.values())
    window = source.profiled_window(cut=stats.no_launch > 0) if launches else None
    if window is not None:
        for pid in sorted(launches, key=lambda p: (p is None, p if type(p) is int else 0, str(p))):
            yield window_line(pid if type(pid) is int else None, *window, launches[pid])


def _program_lines(source: Source) -> Iterator[str]:
    """A program line (record.program_line) per process whose capture holds pyprof.step()'s program mark: its last,
    which holds every step timed until then. A mark that is not what pyprof.step() writes is left out."""
    last: dict = {}
    for pid, text in source.program_marks():
        try:
            body = json.loads(text[len(PROGRAM_MARK_PREFIX):-1])
            fields = (body["unprofiled_step_ns"], body["captured_step_ns"], body["how"])
        except (ValueError, TypeError, KeyError, RecursionError):
            continue
        # Step times as the record's int64 fields hold them (prof refuses a file with a larger integer).
        if all(isinstance(v, list) and all(type(x) is int and 0 <= x < 1 << 63 for x in v) for v in fields[:2]) \
                and isinstance(fields[2], str) and text.endswith("}"):
            last[pid] = fields
    for pid, fields in last.items():
        yield program_line(pid if type(pid) is int else None, *fields)


def _pieces(lines: Iterator[str], piece_chars: int) -> Iterator[str]:
    """``lines`` each ended by its newline, joined into strs of about ``piece_chars``."""
    piece: list[str] = []
    size = 0
    for line in lines:
        piece.append(line)
        size += len(line) + 1
        if size >= piece_chars:
            piece.append("")
            yield "\n".join(piece)
            piece, size = [], 0
    if piece:
        piece.append("")
        yield "\n".join(piece)


def _stats(source: Source) -> Stats:
    # what the reader counted already: what it left out, and replays it could not tie to their capture
    return Stats(oddities=source.oddities, graph_untied=dict(source.graph_untied or {}),
                 graph_captured=source.graph_captured)


_RANGES, _RANGE_NS = ATTRIBUTION.index("ranges"), ATTRIBUTION.index("range_ns")
_HOST = ATTRIBUTION.index("host_ns")


def replayed(node: list, launch: list | None) -> list:
    """The attribution of a kernel replayed from a CUDA graph: its node's (the ranges around the node's capture:
    op, arguments, call site, layer), under the ranges around the graph launch (the step it ran in), and no host
    time (a replay spends none per op). The node's ranges have no times in the replay: they were pushed at the
    capture, which may be long before it."""
    out = list(node)
    out[_RANGES] = list(launch[_RANGES] if launch else []) + list(node[_RANGES])
    out[_RANGE_NS] = list(launch[_RANGE_NS] if launch else []) + [None] * len(node[_RANGE_NS])
    out[_HOST] = None
    return tuple(out)  # as the sweep hands fields on


def _merge_lines(source: Source, infos: Iterator[tuple], stats: Stats, raw_markers: bool) -> Iterator[str]:
    head_line, gpu_names = header(source)
    yield head_line
    no_gpu = no_gpu_name(gpu_names)
    no_call = NO_CALL
    empty_head, empty_tail = encode.attribution(None)
    names: dict = {}  # (kind, short, long) -> JSON: a few hundred distinct kernels, not a million
    # Launch configuration, device, copy size -> JSON of the config and copy parts (bounded: distinct copy
    # sizes could be many).
    shapes = BoundedDict(4 * RECENT)
    places: dict = {}  # (device, stream) -> JSON
    apis: dict = {}
    received = attribution_window()  # attribution number -> fields, as the sweep worker's ``sent``
    encoded = attribution_window()  # attribution number -> its parts' JSON: launches sharing one encode it once
    pending: dict = {}  # launch key -> info, swept but not yet used
    # graph node key (Activity.attribution_key) -> the sweep's info of its creation; kept: a graph replays many times
    nodes: dict = {}
    # (graph node key, graph launch's attribution number) -> (head, tail, call, flags, whether ranges enclosed it)
    node_parts: dict = {}
    recent = BoundedDict(2 * RECENT)  # used already: a graph launch starts many kernels
    counts = BoundedDict(2 * RECENT)  # op call -> kernels so far
    # op call -> its call_id: numbered in order of first record, so the same whichever process swept the launches
    call_ids = BoundedDict(2 * RECENT)
    next_call_id = 0
    line = LINE
    launch_json = API_JSON
    api_end_key = API_END_KEY
    num = encode.integer
    infos = iter(infos)
    nxt = next(infos, None)
    for act in source.activities():
        horizon = act.start_ns + CLOCK_SKEW_NS
        while nxt is not None and nxt[2] <= horizon:
            att = nxt[6]
            if att is not None:  # kept in arrival order, as the worker sent them
                if type(att) is int:  # from a worker: an attribution it sent before
                    nxt = nxt[:6] + ((att, received[att]),) + nxt[7:]
                else:
                    received.add(att[0], att[1])
            k = nxt[0]
            if type(k) is tuple and k and k[0] == "node":
                nodes[k] = nxt
            else:
                pending[k] = nxt
            nxt = next(infos, None)
        key = act.launch_key
        info = pending.pop(key, None)
        if info is not None:
            # First activity of this launch: encode its part of the record once (a graph launch has many).
            _, api, api_start, api_end, pid, tid, fields, call, flags = info
            att = fields  # (number, fields) or None: what a graph's replayed kernels join to their node's
            if fields is None:
                head, tail = empty_head, empty_tail
            else:
                number, fields = fields
                pair = encoded.get(number)
                if pair is None:
                    pair = encode.attribution(fields, raw_markers)
                    encoded.add(number, pair)
                head, tail = pair
            if api is not None and api_start is not None and api_end is not None:
                api_json = apis.get(api)
                if api_json is None:
                    api_json = apis[api] = launch_json % encode.string(api)
                call_json = f"{api_json}{api_start}{api_end_key}{api_end}"
            else:
                call_json = encode.part(_LAUNCH, (api, api_start, api_end))
            info = (pid, tid, call_json, head, tail, call, flags, att,
                    api is not None and api.startswith(GRAPH_LAUNCH_APIS))
            recent.add(key, info)
        else:
            info = recent.get(key)
        stats.records += 1
        if info is None:
            stats.no_launch += 1
            pid, tid, call_json, head, tail, call, flags, att, by_graph = (act.pid, None, no_call, empty_head,
                                                                           empty_tail, None, 0, None, False)
        else:
            pid, tid, call_json, head, tail, call, flags, att, by_graph = info
            if pid is None:
                pid = act.pid
        node = act.attribution_key
        if node is not None:
            is_kernel = act.kind == "kernel"
            stats.graph_kernels += is_kernel
            pkey = (node, None if att is None else att[0])
            parts = node_parts.get(pkey)
            if parts is None and node in nodes:
                fields = nodes[node][6]
                h, t = (empty_head, empty_tail) if fields is None else \
                    encode.attribution(replayed(fields[1], None if att is None else att[1]), raw_markers)
                parts = node_parts[pkey] = (h, t, nodes[node][7], nodes[node][8], fields is not None)
            if parts is not None:
                head, tail, node_call, flags, tied = parts
                stats.graph_kernels_tied += tied and is_kernel
                # each replay is a call of its own: subSeqId counts from 0 in every graph launch
                call = None if node_call is None else (node_call, key)
        elif by_graph:
            stats.graph_launch_kernels += act.kind == "kernel"
        sub = call_id = None
        if call is not None:
            call_id = call_ids.get(call)
            if call_id is None:
                call_id = next_call_id
                next_call_id += 1
                call_ids.add(call, call_id)
        if act.kind == "kernel":
            stats.kernels += 1
            if flags:
                stats.kernels_with_op += flags & HAS_OP
                if flags & BPROP:
                    stats.bprop_kernels += 1
                    if flags & NUMBERED:
                        stats.bprop_numbered += 1
                        if flags & HAS_FWD:
                            stats.bprop_with_fwd += 1
                elif flags & RECOMPUTE:
                    stats.recompute_kernels += 1
            if call is not None:
                sub = counts.get(call, 0)
                counts.add(call, sub + 1)
        k = (act.kind, act.short_name, act.long_name)
        name_json = names.get(k)
        if name_json is None:
            name_json = names[k] = encode.part(_NAME, k, first=True)
        # What a kernel's launch configuration and device decide repeats across millions of records: one
        # dict lookup instead of formatting each field.
        k = (act.device, act.stream)
        where = places.get(k)
        if where is None:
            where = places[k] = encode.part(_PLACE, k)
        k = (act.grid, act.block, act.registers, act.static_smem_bytes, act.dynamic_smem_bytes, act.device,
             act.bytes, act.copy_kind, act.smem_bytes, act.est_occupancy_pct)
        shape = shapes.get(k)
        if shape is None:
            shape = shape_parts(act.grid, act.block, act.registers, act.static_smem_bytes, act.dynamic_smem_bytes,
                                act.smem_bytes, act.est_occupancy_pct, gpu_names.get(act.device, no_gpu), act.bytes,
                                act.copy_kind)
            shapes.add(k, shape)
        start = act.start_ns
        yield line % (name_json, act.end_ns - start, start, num(pid), num(tid), where,
                      num(act.correlation_id), shape[0], call_json, shape[1], head, num(sub), num(call_id), tail)
