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

import json
import os
from typing import Iterator

from pyprof.common import BoundedDict, Record, no_cyclic_gc
from pyprof.parse import encode
from pyprof.parse.correlate import BPROP, HAS_FWD, HAS_OP, NUMBERED, RECOMPUTE, Correlator, Stats
from pyprof.parse.activities import Source, attribution_window

#: How far a GPU timestamp may run ahead of the launch call's CPU timestamp (clock conversion jitter).
CLOCK_SKEW_NS = 50_000_000
#: Launches kept after their first activity, for the further kernels of a CUDA graph launch, and op calls
#: whose kernel count (subSeqId) is kept (at least this many, the newest; common.BoundedDict): the kernels of
#: one call run back to back, far within this.
RECENT = 16_384
#: Exports smaller than this are swept in-process: a worker process is not worth starting.
WORKER_MIN_BYTES = 16 << 20


def lines(source: Source, worker: bool | None = None) -> tuple[Iterator[str], Stats]:
    """Return (the records' JSON lines, without newlines, in activity start order, their Stats).

    ``worker``: sweep in a worker process (None: when a core is free, the source can be reopened there
    and the file is large). The Stats fill in as the lines are consumed."""
    if worker is None:
        worker = _worth_a_worker(source)
    if worker and source.reopen_args() is not None:  # Kineto traces are read in memory
        from pyprof.parse.sweep_worker import launch_infos_from_worker

        stats = Stats(oddities=source.oddities)
        infos = launch_infos_from_worker(source, stats.oddities)
    else:
        stats = Stats(oddities=source.oddities)
        infos = Correlator(source, stats.oddities).launch_infos()
    return _merge(source, infos, stats), stats


def records(source: Source, worker: bool | None = None) -> tuple[Iterator[Record], Stats]:
    """Return (one Record per activity in start order, their Stats): the JSON lines, decoded."""
    out, stats = lines(source, worker)
    return (Record.from_dict(json.loads(line)) for line in out), stats


def _worth_a_worker(source: Source) -> bool:
    """A worker pays off with a core to spare and a large file; without a free core the pickling between
    the two processes only adds work (the output is the same either way: a test checks it)."""
    args = source.reopen_args()
    cores = os.cpu_count() or 1
    if args is None or cores - os.getloadavg()[0] < 1.0:
        return False
    try:
        return os.path.getsize(args[1]) >= WORKER_MIN_BYTES
    except OSError:
        return False


def _merge(source: Source, infos: Iterator[tuple], stats: Stats) -> Iterator[str]:
    with no_cyclic_gc():  # only acyclic tuples and strings are made here
        yield from _merge_lines(source, infos, stats)


def _merge_lines(source: Source, infos: Iterator[tuple], stats: Stats) -> Iterator[str]:
    known = source.gpus()
    gpus = {dev: f'"gpu":{encode.value(g.name)},"gpu_props":{encode.value(g.props)}' for dev, g in known.items()}
    # A trace may describe fewer devices than its kernels ran on (a PyTorch profiler trace lists device 0 while its
    # kernels ran on device 2): when every device it describes is the same model, that is the GPU of the others.
    models = {g.name for g in known.values()}
    no_gpu = next(iter(gpus.values())) if len(models) == 1 and None not in models else '"gpu":null,"gpu_props":null'
    no_call = '"api":null,"api_start_ns":null,"api_end_ns":null'
    empty_head, empty_tail = encode.attribution(None)
    names: dict = {}  # (kind, short, long) -> JSON: a few hundred distinct kernels, not a million
    # Launch configuration, device, copy size -> JSON before and after the api keys (bounded: distinct copy sizes
    # could be many).
    shapes = BoundedDict(4 * RECENT)
    places: dict = {}  # (device, stream) -> JSON
    apis: dict = {}
    received = attribution_window()  # attribution number -> fields, as the sweep worker's ``sent``
    encoded = attribution_window()  # attribution number -> (head, tail) JSON: launches sharing one encode it once
    pending: dict = {}  # launch key -> info, swept but not yet used
    recent = BoundedDict(2 * RECENT)  # used already: a graph launch starts many kernels
    counts = BoundedDict(2 * RECENT)  # op call -> kernels so far
    num, nums = encode.integer, encode.ints
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
            pending[nxt[0]] = nxt
            nxt = next(infos, None)
        key = act.launch_key
        info = pending.pop(key, None)
        if info is not None:
            # First activity of this launch: encode its part of the record once (a graph launch has many).
            _, api, api_start, api_end, pid, tid, fields, call, flags = info
            api_json = apis.get(api)
            if api_json is None:
                api_json = apis[api] = encode.value(api)
            if fields is None:
                head, tail = empty_head, empty_tail
            else:
                number, fields = fields
                pair = encoded.get(number)
                if pair is None:
                    pair = encode.attribution(fields)
                    encoded.add(number, pair)
                head, tail = pair
            info = (pid, tid, f'"api":{api_json},"api_start_ns":{api_start},"api_end_ns":{api_end}', head, tail,
                    call, flags)
            recent.add(key, info)
        else:
            info = recent.get(key)
        stats.records += 1
        if info is None:
            stats.no_launch += 1
            pid, tid, call_json, head, tail, call, flags = act.pid, None, no_call, empty_head, empty_tail, None, 0
        else:
            pid, tid, call_json, head, tail, call, flags = info
            if pid is None:
                pid = act.pid
        sub = None
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
            name_json = names[k] = (f'{{"kind":{encode.value(act.kind)},"kShortName":{encode.value(act.short_name)},'
                                    f'"kLongName":{encode.value(act.long_name)},"kDuration":')
        # What a kernel's launch configuration and device decide repeats across millions of records: one
        # dict lookup instead of formatting each field.
        k = (act.device, act.stream)
        where = places.get(k)
        if where is None:
            where = places[k] = f'"device":{num(act.device)},"stream":{num(act.stream)}'
        k = (act.grid, act.block, act.registers, act.static_smem_bytes, act.dynamic_smem_bytes, act.device,
             act.bytes, act.copy_kind, act.smem_bytes, act.est_occupancy_pct)
        shape = shapes.get(k)
        if shape is None:
            smem = act.smem_bytes
            if smem is None and act.static_smem_bytes is not None and act.dynamic_smem_bytes is not None:
                smem = act.static_smem_bytes + act.dynamic_smem_bytes
            shape = (
                f'"grid":{nums(act.grid)},"block":{nums(act.block)},"registers":{num(act.registers)},'
                f'"static_smem_bytes":{num(act.static_smem_bytes)},'
                f'"dynamic_smem_bytes":{num(act.dynamic_smem_bytes)},"smem_bytes":{num(smem)},'
                f'"est_occupancy_pct":{encode.value(act.est_occupancy_pct)},{gpus.get(act.device, no_gpu)}',
                f'"bytes":{num(act.bytes)},"copy_kind":{encode.value(act.copy_kind)}')
            shapes.add(k, shape)
        start = act.start_ns
        yield (f'{name_json}{act.end_ns - start},"start_ns":{start},"end_ns":{act.end_ns},'
               f'"pid":{num(pid)},"tid":{num(tid)},{where},"correlation_id":{num(act.correlation_id)},'
               f'{shape[0]},{call_json},{shape[1]},{head},"subSeqId":{num(sub)},{tail}}}')
