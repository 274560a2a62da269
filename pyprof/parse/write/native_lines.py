"""The record lines of an nsys export made by the compiled core (docs/parse.md, "The compiled core"): which exports it
takes; its sweep and attributions (pyprof.parse._core.Sweep, Attributor), given the Python definitions they follow;
and the JSON of each distinct part of a line, made by the Python path's own code, for its line writer
(pyprof.parse._core.LineWriter). writer._merge_lines and correlate.Correlator are the reference.
"""
from __future__ import annotations

import sqlite3

from pyprof.parse.attribute import correlate

from pyprof.parse.write import encode, lineparts, native
from pyprof.parse.attribute import markers as mk
from pyprof.parse.readers.activities import WINDOW
from pyprof.parse.attribute.correlate import DEEP_RANGES, MAX_RANGE_DEPTH, OUTPUT_WAIT_NS, Correlator
from pyprof.parse.readers.frames import user_site
from pyprof.parse.readers.nsys import KERNEL, MEMCPY, MEMSET, NsysSource, _api_name
from pyprof.parse.readers.sqlrows import Query
from pyprof.record import COMPILED_MOD


def takes(source) -> bool:
    """True when the compiled core parses ``source``, the whole file: built and not switched off, an nsys export
    without the features it leaves to Python (NsysSource.native_queries)."""
    return native.enabled() and type(source) is NsysSource and source.native_queries() is not None


class Parts:
    """The JSON of each distinct part of a line, made by the Python code that makes it on the Python path; the core
    asks once per distinct key (a kernel's name ids, a device and stream, a launch configuration, an API name id)
    and keeps the answer. The attributions' parts come with the sweep's infos (_attributor)."""

    def __init__(self, source, gpu_names: dict) -> None:
        self._source = source
        self._gpu_names = gpu_names
        self._no_gpu = lineparts.no_gpu_name(gpu_names)
        if KERNEL in source.cols:
            # read when the Python path reads them (its kernel reader, at its start; else at the first launch call
            # named): reading counts a text that is not UTF-8, and the summaries of both paths are the same
            source.strings

    def name(self, table: int, *ids) -> str:
        """The name part of a kernel (table 0: its short and long name ids), memcpy (1: its copyKind) or memset."""
        if table == 0:
            strings = self._source.strings
            long_name = strings.get(ids[1], "")
            return encode.part(lineparts._NAME, ("kernel", strings.get(ids[0], long_name), long_name), first=True)
        name, _ = self._source.copy_name(_TABLES[table], ids[0] if ids else None)
        return encode.part(lineparts._NAME, ("memcpy" if table == 1 else "memset", name, name), first=True)

    def place(self, device: int | None, stream: int | None) -> str:
        """The place part."""
        return encode.part(lineparts._PLACE, (device, stream))

    def shape(self, table: int, gx, gy, gz, bx, by, bz, registers, static_smem, dynamic_smem, device, nbytes,
              copy_kind_id) -> tuple[str, str]:
        """The config and copy parts of a kernel (table 0) or a copy."""
        gpu = self._gpu_names.get(device, self._no_gpu)
        if table == 0:
            return lineparts.shape_parts((gx, gy, gz), (bx, by, bz), registers, static_smem, dynamic_smem, None,
                                         None, gpu, None, None)
        _, ck = self._source.copy_name(_TABLES[table], copy_kind_id)
        return lineparts.shape_parts((), (), None, None, None, None, None, gpu, nbytes, ck)

    def api(self, name_id: int | None) -> str:
        """The launch part up to the call's start time."""
        return lineparts.API_JSON % encode.string(_api_name(self._source.strings.get(name_id, "")))


def _attributor(correlator, raw_markers: bool):
    """The compiled attributions of ``correlator``'s launches (_core.Attributor; correlate.Correlator's
    _launch_attribution and correlate._info are the reference, with encode.attribution's JSON parts): its infos are
    ``((number, (head, tail)), call, flags)``, the parts already JSON."""
    # its own bare backward attribution: the module's keeps the info of the Python path's form (correlate._info)
    bare = correlate.Attribution()
    bare.dir = correlate._BACKWARD_BARE.dir
    defs = {
        "Attribution": correlate.Attribution, "Marker": mk.Marker, "decode": mk.decode,
        "output_ops": mk.OUTPUT_OPS.search, "EngineSeq": correlate._EngineSeq, "UNDECODED": correlate._UNDECODED,
        "EMPTY": correlate._EMPTY, "BACKWARD_BARE": bare, "serials": correlate._serials,
        "string": encode.string, "COMPILED_MOD": COMPILED_MOD, "ENCODERS": encode.ENCODERS,
        "user_site": user_site,
        "names": mk._names, "split_name": mk._split_name, "decoded": mk._cache, "sizes_json": mk._sizes_json,
        "SEQ": mk.SEQ, "OP": mk.OP, "MODULE": mk.MODULE, "LAYER": mk.LAYER, "TRACE": mk.TRACE, "REPR": mk.REPR,
    }
    runs = tuple(tuple((f.name, f.json, int(f.always), encode.DEFAULT_JSON[f.name]) for f in run)
                 for run in encode._RUNS)
    return native._core.Attributor(correlator, defs, runs, raw_markers)


def record_lines(source, stats, raw_markers: bool, worker: bool = False, piece_chars: int = 0):
    """parse's header line, then the records' lines of ``source`` made by the compiled core (writer._merge_lines is
    the reference): the launch calls swept and attributed in C, in this process or, with ``worker``, in a forked
    worker process while this one writes the lines (the sweep is the larger half of the work); the activities read,
    joined and written in C. ``piece_chars``: each line ended by its newline, as many to a str as pass it (0: each
    line a str, without its newline)."""
    head_line, gpu_names = lineparts.header(source)
    yield head_line + "\n" if piece_chars else head_line
    native._core.read_ahead(native.read_ahead())
    activity_queries, launch_query = source.native_queries()
    range_query = source.range_query()
    infos = None
    if worker:  # imported only here: most parses fork no worker, and need not import multiprocessing
        from pyprof.forked import WorkerError
        from pyprof.parse.attribute import sweep_worker
    if launch_query is not None:
        args = (source, launch_query, range_query, raw_markers)
        # the worker is forked here, before this process starts the line writer's reading threads
        infos = sweep_worker.CoreInfos(_sweep_in_worker, args, stats.oddities) if worker else \
            _sweep(*args, stats.oddities)
    segments = tuple(lineparts.LINE.split("%s"))
    try:
        lines = native._core.LineWriter(source.rows.uri,
                                        tuple(None if q is None else q.plain() for q in activity_queries),
                                        None if launch_query is None else launch_query.plain(),
                                        iter(()) if infos is None else infos,
                                        segments, Parts(source, gpu_names), lineparts.NO_CALL,
                                        encode.attribution(None), lineparts.API_END_KEY, stats,
                                        lineparts.CLOCK_SKEW_NS, 2 * lineparts.RECENT, 2 * WINDOW, piece_chars)
        try:
            yield from lines  # the cyclic collector is off around them (writer._merge)
            if worker and infos is not None:
                for _ in infos:  # the end message: the count checked, the sweep's oddities added
                    raise WorkerError(f"{sweep_worker.NAME} sent more launch infos than there are launch calls")
        finally:
            lines.close()
            if infos is not None:
                infos.close()
    except native._core.Error as e:
        raise source.rows.error(sqlite3.DatabaseError(str(e))) from None


def _sweep(source, launches: Query, ranges: Query | None, raw_markers: bool, oddities: dict):
    """The compiled sweep of ``source``'s launch calls (``ranges`` None: an export without ranges), counting what
    it leaves out in ``oddities``: its infos, in launch order (native.sweep)."""
    correlator = Correlator(source, oddities)
    feed = None if ranges is None else \
        native.RangeFeed(source, correlator, ranges, DEEP_RANGES, MAX_RANGE_DEPTH, oddities)
    return native.sweep(source, launches, _attributor(correlator, raw_markers), feed, OUTPUT_WAIT_NS)


def _sweep_in_worker(conn, source, launches: Query, ranges: Query | None, raw_markers: bool) -> None:
    """The sweep worker's body (sweep_worker.CoreInfos): the compiled sweep, on the parent's source object but with
    the core's own connections (the parent's is never used here), its infos sent to the parent."""
    from pyprof import forked
    from pyprof.parse.attribute import sweep_worker

    oddities: dict = {}  # this process's own: the parent adds them to its count at the end
    swept = _sweep(source, launches, ranges, raw_markers, oddities)
    try:
        sweep_worker.send_infos(conn, lambda: swept, oddities)
    except native._core.Error as e:  # the reader's InputError, as in the parsing process (sent as such)
        raise source.rows.error(sqlite3.DatabaseError(str(e))) from None
    finally:
        swept.close()
    forked.exit_done(conn)  # the end message is sent: the parent waits only for the exit


_TABLES = (KERNEL, MEMCPY, MEMSET)  # by the core's table number
