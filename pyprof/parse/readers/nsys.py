"""Nsight Systems SQLite exports (2021-2026 schemas): rows -> the intermediate model.

Every table and column is checked with ``PRAGMA table_info`` first: nsys creates tables lazily and
adds columns over the years. Rows are read with cursors in start-time order; nothing is joined here.
"""
from __future__ import annotations

import heapq
from typing import Iterator

from pyprof.common import InputError
from pyprof.record import GRAPH_MARK_PREFIX, PROGRAM_MARK_PREFIX
from pyprof.parse.readers import graph_marks
from pyprof.parse.attribute import markers as mk
from pyprof.parse.readers import nsys_python as py
from pyprof.parse.readers.activities import Activity, GpuInfo, Launch, MemoryEvent
from pyprof.parse.readers import nsys_host, nsys_scan
from pyprof.parse.readers.sqlrows import (SQLITE_ERRORS, Column, Query, SqliteSource, Valid, as_is, integer, integer_of,
                                  integers, text_of)

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
MEMORY = "CUDA_GPU_MEMORY_USAGE_EVENTS"  # --cuda-memory-usage=true
# --cuda-graph-trace=node: each graph node's creation (during stream capture: on the capturing thread, inside the
# ranges then open) and, at instantiation, the node it copies (originalGraphNodeId).
GRAPH_NODES = "CUDA_GRAPH_NODE_EVENTS"
#: What a pseudo-launch of a graph node's creation is called (LAUNCH_INFO's api; never on a record).
GRAPH_NODE_API = "[graph node created]"
_MEMORY_COLUMNS = ("start", "globalPid", "deviceId", "bytes", "memKind", "memoryOperationType", "correlationId")
#: ENUM_CUDA_MEM_KIND ids of memory in the host's RAM (pageable, pinned): their events are the device "host".
_HOST_KINDS = (0, 1)
#: ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation.
_FREE = 1
_UNKNOWN = object()

NVTX_PUSH_POP = 59

# What a row needs to be read at all: integer times in order, and the ids that place it. Other rows are left out and
# counted (check()).
_ACTIVITY = Valid("start", "end")
_LAUNCH = Valid("start", "end", ("globalTid", "correlationId"))
_RANGE = Valid("e.start", "e.end", ("e.globalTid",))
_VALID_ACTIVITY, _VALID_LAUNCH, _VALID_RANGE = _ACTIVITY.sql, _LAUNCH.sql, _RANGE.sql
_VALID_CALL = Valid("r.start", "r.end", ("r.globalTid",)).sql  # a runtime row joined as ``r``
_PUSH_POP = f"e.eventType = {NVTX_PUSH_POP}"
_RANGES = f"{_PUSH_POP} AND {_VALID_RANGE}"  # the push/pop ranges read

#: Each table's kind for the compiled pass (nsys_scan), and the condition of the rows read of it, whose stored order
#: the pass checks (_order_by).
_SCANNED = {KERNEL: (nsys_scan.ACTIVITIES, _VALID_ACTIVITY), MEMCPY: (nsys_scan.ACTIVITIES, _VALID_ACTIVITY),
            MEMSET: (nsys_scan.ACTIVITIES, _VALID_ACTIVITY), RUNTIME: (nsys_scan.CALLS, _VALID_LAUNCH),
            NVTX: (nsys_scan.RANGES, _RANGES)}

# The describing columns of each query, after its start and end (each an integer or NULL).
_KERNEL_COLUMNS = ("deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName", "gridX", "gridY",
                   "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
                   "dynamicSharedMemory")
_COPY_COLUMNS = ("deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind")
_LAUNCH_COLUMNS = (as_is("start"), as_is("end"), as_is("globalTid"), as_is("correlationId"))  # valid: integers

_CHECK_ROWS = 1 << 16  # rows per query when checking the stored order (a text of under 1 MB)
_TID_MASK = 0xFFFFFF
_PID_MASK = ~_TID_MASK  # globalPid is globalTid with the thread bits zero

# CUpti_ActivityMemcpyKind, for exports older than the ENUM_* tables.
MEMCPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM_HtoD", 12: "UVM_DtoH", 13: "UVM_DtoD"}

# GPU properties copied into records, by TARGET_INFO_GPU column name.
_GPU_PROPS = ("smCount", "totalMemory", "memoryBandwidth", "clockRate", "l2CacheSize", "computeMajor",
              "computeMinor", "maxShmemPerSm", "maxRegistersPerSm", "maxWarpsPerSm", "threadsPerWarp")


def os_pid(global_id: int | None) -> int | None:
    """The OS process id packed in a globalTid / globalPid (bits 24-47)."""
    return None if global_id is None else (global_id >> 24) & 0xFFFFFF


class NsysSource(SqliteSource):
    """Reader of one nsys SQLite export. Raises InputError on open if the file is not one."""

    format = "nsys"

    def __init__(self, path: str, display: str | None = None):
        super().__init__(path, display)
        self.cols = {t: self._columns(t) for (t,) in self.rows.all("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "StringIds" not in self.cols:
            raise InputError(self.path, "SQLite database without a StringIds table: not an Nsight Systems export")
        for table, needed in ((KERNEL, ("start", "end", "correlationId")),
                              (RUNTIME, ("start", "end", "globalTid", "correlationId")),
                              (NVTX, ("start", "end", "eventType", "globalTid")), ("StringIds", ("id", "value"))):
            have = self.cols.get(table)
            if have is not None and not all(c in have for c in needed):
                raise InputError(self.path, f"table {table} lacks columns {[c for c in needed if c not in have]}")
        self._strings: dict[int, str] | None = None
        self._stored: dict = {}  # (table, condition, alias) -> _order_by's clause
        self._scanned: dict = {}  # table -> the compiled pass's nsys_scan.Facts, or None where it takes no part
        self._payload: object = _UNKNOWN  # the ranges' JSON payload column and join (_json_payload), once known
        self.version = self._meta("EXPORT_PRODUCT_VERSION")
        # --python-backtrace=cuda: launches carry their calling line (Source.launch_sites), when any has a call stack
        self.launch_sites = "callchainId" in self.cols.get(RUNTIME, ()) and \
            set(py.CALLCHAIN_COLUMNS) <= self.cols.get(py.CALLCHAINS, set()) and \
            bool(self.rows.all(f"SELECT 1 FROM {py.CALLCHAINS} LIMIT 1"))
        self._sites: dict[int, str] | None = None
        self._calls: dict | None = None  # _calls_by_process, once
        self._captured: list | None = None  # captured_ranges, once

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self.rows.all(f"PRAGMA table_info('{table}')")}

    def _meta(self, key: str) -> str | None:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if {"name", "value"} <= self.cols.get(table, set()):
                rows = self.rows.all(f"SELECT value FROM {table} WHERE name = ?", (key,))
                return str(rows[0][0]) if rows else None
        return None

    def _col(self, table: str, col: str) -> Column:
        """A describing integer column: itself when it holds an integer, else NULL (and NULL when absent)."""
        return integer_of(col) if col in self.cols[table] else as_is("NULL")

    @property
    def strings(self) -> dict[int, str]:
        """StringIds as a dict (names of kernels, API calls and registered NVTX strings)."""
        if self._strings is None:
            self._strings = {i: str(v) for i, v in self.rows.stream("SELECT id, value FROM StringIds")
                             if v is not None}
        return self._strings

    def check(self) -> None:
        """Read the last rows of each table used, so that a truncated file fails before any output, and count
        the rows whose times or ids are unusable (they are left out of the reading)."""
        for table in (KERNEL, MEMCPY, MEMSET, RUNTIME, NVTX, "StringIds"):
            if table in self.cols:
                self.rows.last_row(table)
        # the compiled pass reads the host intervals now too: the writer asks for them first thing, and a second
        # pass would cost most of the first. The tables' passes run at once where parse reads ahead (nsys_scan).
        unscanned = [nsys_scan.Table(t, kind, self.cols[t], t in (NVTX, RUNTIME)) for t, (kind, _) in _SCANNED.items()
                     if t in self.cols and self._scanned.get(t, _UNKNOWN) is _UNKNOWN]
        self._scanned.update(nsys_scan.scan_tables(self.rows, unscanned, NVTX_PUSH_POP))
        # Ranges without an end (never closed, marks) were always left out: only broken rows are counted.
        for table, where, what in ((KERNEL, _VALID_ACTIVITY, "kernel"), (MEMCPY, _VALID_ACTIVITY, "memcpy"),
                                   (MEMSET, _VALID_ACTIVITY, "memset"), (RUNTIME, _VALID_LAUNCH, "launch call"),
                                   (NVTX, f"e.eventType IS NOT {NVTX_PUSH_POP} OR e.end IS NULL OR {_VALID_RANGE}",
                                    "NVTX range")):
            if table in self.cols:
                facts = self._facts(table, host=table in (NVTX, RUNTIME))
                self.rows.skip(f"{what} rows with a start, end or id that is not an integer (or ends before it "
                               "starts, or 2^63 ns or more after it), left out",
                               facts.invalid if facts is not None else
                               self.rows.count(f"SELECT count(*) FROM {table} e WHERE NOT ({where})"))

    def _facts(self, table: str, host: bool = False) -> nsys_scan.Facts | None:
        """The compiled pass's Facts of ``table`` (with its host intervals when ``host``), read once; None where the
        pass takes no part (nsys_scan.scan): the SQL of this reader answers then."""
        facts = self._scanned.get(table, _UNKNOWN)
        if facts is _UNKNOWN or (host and facts is not None and facts.host is None):
            facts = self._scanned[table] = nsys_scan.scan(self.rows, table, _SCANNED[table][0], self.cols[table],
                                                          host, NVTX_PUSH_POP)
        return facts

    def gpus(self) -> dict[int, GpuInfo]:
        """GPU name and properties by device id (empty when the export has no TARGET_INFO_GPU)."""
        if "TARGET_INFO_GPU" not in self.cols or "name" not in self.cols["TARGET_INFO_GPU"]:
            return {}
        props = [c for c in _GPU_PROPS if c in self.cols["TARGET_INFO_GPU"]]
        out = {}
        cols = "".join(f", {integer(c)}" for c in props)
        for row in self.rows.all(f"SELECT id, name{cols} FROM TARGET_INFO_GPU WHERE typeof(id) = 'integer'"):
            out[row[0]] = GpuInfo(None if row[1] is None else str(row[1]), dict(zip(props, row[2:])))
        return out

    def ranges(self) -> Iterator[tuple]:
        """Push/pop ranges (eventType 59) with an end, as model.RANGE_ROW tuples straight from the cursor,
        in start order (equal starts in any order: the sweep nests them). Registered strings are resolved
        in the query."""
        if NVTX not in self.cols:
            return iter(())
        plain = self._plain_range_query()
        rows = self.rows.stream(plain.sql) if plain is not None else self._ranges_with_payloads()
        captured = self.captured_ranges()
        # graph captures' ranges from before the profiled range (graph_marks), merged in start order
        return heapq.merge(rows, captured, key=_second) if captured else rows

    def captured_ranges(self) -> list[tuple]:
        """The ranges of CUDA graph captures that pyprof wrote into the capture as graph marks
        (pyprof.parse.readers.graph_marks), as RANGE_ROW tuples in start order; read only where graph nodes were
        traced (empty otherwise). The sweep takes them with the export's own ranges (the Python feed: the compiled
        one reads the export's alone)."""
        if self._captured is None:
            self._captured = graph_marks.ranges(self._graph_mark_rows(), _PID_MASK, _TID_MASK, self.rows.oddities) \
                if self._node_rows_exist() and NVTX in self.cols else []
        return self._captured

    def _graph_mark_rows(self) -> list[tuple]:
        """(globalTid, start, text, clock reading: its int64 payload) of each graph mark, in start order."""
        if not {"text", "start", "int64Value"} <= self.cols[NVTX]:
            return []
        registered = "textId" in self.cols[NVTX]
        text = "coalesce(e.text, s.value)" if registered else "e.text"
        join = " LEFT JOIN StringIds s ON s.id = e.textId" if registered else ""
        prefix = GRAPH_MARK_PREFIX.replace("'", "''")  # no LIKE wildcard in it; its quotes doubled for SQL
        return self.rows.all(f"SELECT e.globalTid, e.start, {text}, e.int64Value FROM {NVTX} e{join} WHERE "
                             f"typeof(e.globalTid) = 'integer' AND typeof(e.start) = 'integer' AND "
                             f"{text} LIKE '{prefix}%' ORDER BY e.start")

    def range_query(self) -> Query | None:
        """The query of :meth:`ranges` when its rows are the ranges as they come (the compiled core reads it too);
        None without ranges, when some range has a JSON payload (its text is rebuilt in Python), or with graph
        captures' ranges to merge in (captured_ranges)."""
        return None if NVTX not in self.cols or self.captured_ranges() else self._plain_range_query()

    def _plain_range_query(self) -> Query | None:
        """range_query without the graph captures' ranges."""
        if self._payload is _UNKNOWN:  # looked for once: a scan of every range when none has a payload
            facts = self._facts(NVTX)
            self._payload = self._json_payload(_RANGES) if facts is None else \
                self._payload_column() if facts.payload else None
        return None if self._payload is not None else self._range_query()

    def _ranges_with_payloads(self) -> Iterator[tuple]:
        # --pytorch=functions-trace-shapes: the shapes come as the range's payload, exported as JSON
        column, json_join = self._payload
        return py.with_payload_texts(self.rows.stream(self._range_query(column, json_join).sql), mk.payload_text)

    def _range_query(self, extra: Column | None = None, extra_join: str = "") -> Query:
        """The ranges' query (RANGE_ROW), with a further column and its join when given."""
        has = self.cols[NVTX]
        registered = "textId" in has
        text = text_of("e.text", "s.value") if registered else text_of("e.text")
        join = " LEFT JOIN StringIds s ON s.id = e.textId" if registered else ""
        # pyprof's call id: the nvtx package sends a Python int as an INT64 payload (int64Value); a
        # uint64 one is taken too.
        payload = (integer_of("e.int64Value", "e.uint64Value") if {"int64Value", "uint64Value"} <= has
                   else integer_of("e.int64Value") if "int64Value" in has else as_is("NULL"))
        columns = (as_is("e.globalTid"), as_is("e.start"), as_is("e.end"), text, payload)
        return Query(columns + (() if extra is None else (extra,)), f"{NVTX} e{join}{extra_join}", _RANGE,
                     _PUSH_POP, self._order_by(NVTX, _RANGES, "e."))

    def _json_payload(self, where: str) -> tuple[Column, str] | None:
        """(the column of a range's JSON payload, its join) when some push/pop range has one, else None: exports
        without payloads are read as before, and as fast."""
        sources = [c for c in ("jsonText", "jsonTextId") if c in self.cols[NVTX]]
        if not sources or not self.rows.all(  # a damaged page here is a refusal naming the file, as in any query
                f"SELECT 1 FROM {NVTX} e WHERE {where} AND ({' OR '.join(f'e.{c} IS NOT NULL' for c in sources)}) "
                "LIMIT 1"):
            return None
        return self._payload_column()

    def _payload_column(self) -> tuple[Column, str]:
        """(the column of a range's JSON payload, its join), of an export where some range has one."""
        texts = ("e.jsonText",) if "jsonText" in self.cols[NVTX] else ()
        if "jsonTextId" not in self.cols[NVTX]:
            return (text_of(*texts) if texts else as_is("NULL")), ""
        return text_of(*texts, "j.value"), " LEFT JOIN StringIds j ON j.id = e.jsonTextId"

    @staticmethod
    def process_of(thread: int) -> int:
        """The process of a range's thread (globalTid): globalPid, the thread bits zero."""
        return thread & _PID_MASK

    def _order_by(self, table: str, where: str = "1", alias: str = "") -> str:
        """The ORDER BY that puts the rows of ``table`` in start order (rowid breaks ties: a sweep worker and
        the writer must see launches in one order), or nothing when they are stored so (checked once)."""
        clause = self._stored.get((table, where, alias))
        if clause is None:
            facts = self._facts(table) if _SCANNED.get(table, (None, None))[1] == where else None
            try:
                stored = facts.in_order if facts is not None else self._stored_by_start(table, where)
                clause = "" if stored else f"ORDER BY {alias}start, {alias}rowid"
            except SQLITE_ERRORS:  # a table without rowids (no nsys version writes one): sort by start
                clause = f"ORDER BY {alias}start"
            self._stored[(table, where, alias)] = clause
        return clause

    def _stored_by_start(self, table: str, where: str) -> bool:
        """True when the rows of ``table`` matching ``where`` are stored (rowid order) in start order.

        nsys writes NVTX rows so in every export seen, but the format does not promise it. Sorting
        millions of ranges in SQL costs a third of reading them (more once the sort spills to disk);
        checking costs a tenth: the starts come out of SQLite as one text per 65536 rows, parsed by numpy."""
        import numpy as np

        first = self.db.execute(f"SELECT rowid FROM {table} ORDER BY rowid LIMIT 1").fetchone()
        if first is None:
            return True
        (last,) = self.db.execute(f"SELECT rowid FROM {table} ORDER BY rowid DESC LIMIT 1").fetchone()
        prev = None
        for lo in range(first[0], last + 1, _CHECK_ROWS):
            (text,) = self.db.execute(f"SELECT group_concat(e.start) FROM {table} e WHERE e.rowid BETWEEN ? AND ? "
                                      f"AND {where}", (lo, lo + _CHECK_ROWS - 1)).fetchone()
            if not text:
                continue
            try:
                starts = np.fromstring(text, dtype=np.int64, sep=",")
            except ValueError:
                return False  # a start that is not an integer: let SQL sort them as it did before
            if (prev is not None and starts[0] < prev) or not bool(np.all(starts[1:] >= starts[:-1])):
                return False
            prev = starts[-1]
        return True

    def _launch_query(self, *columns: Column) -> Query | None:
        if RUNTIME not in self.cols:
            return None
        work = [f"SELECT correlationId FROM {t}" for t in (KERNEL, MEMCPY, MEMSET) if t in self.cols]
        if not work:
            return None
        # The IN filter ignores the process (a superset); the exact (process, id) join is the dict lookup. UNION ALL:
        # IN finds the same rows without the union's own temporary b-tree (4 ms of 35 on a 50k-kernel export).
        # rowid breaks ties of start: a sweep worker and the writer must see the launches in one order.
        return Query(columns, RUNTIME, _LAUNCH, f"correlationId IN ({' UNION ALL '.join(work)})",
                     self._order_by(RUNTIME, _VALID_LAUNCH))

    def launch_times(self) -> Iterator[tuple]:
        """(thread, start_ns, end_ns) of every launch, in the order of :meth:`launches`: all the sweep needs (the
        Launches themselves when they carry a site)."""
        if self.launch_sites:
            return self.launches()
        query = self._launch_query(as_is("globalTid"), as_is("start"), as_is("end"))
        calls = iter(()) if query is None else self.rows.stream(query.sql)
        nodes = self._node_rows()
        if nodes is None:
            return calls
        return heapq.merge(calls, ((t, s, s) for t, s, _n in nodes), key=_second)

    def _node_rows(self) -> Iterator[tuple] | None:
        """(globalTid, start, graphNodeId) of each graph node's first creation, in start order; None without the
        table. Their attributions are those of graph kernels (Activity.attribution_key)."""
        have = self.cols.get(GRAPH_NODES)
        if not have or not {"start", "globalTid", "graphNodeId"} <= have:
            return None
        return self.rows.stream(
            f"SELECT globalTid, MIN(start) AS s, graphNodeId FROM {GRAPH_NODES} WHERE "
            f"{integers('globalTid', 'start', 'graphNodeId')} GROUP BY globalTid, graphNodeId ORDER BY s, graphNodeId")

    def _originals(self) -> dict[tuple, int]:
        """(globalPid, graph node) -> the node it was copied from, followed to the first: an instantiated graph's
        node to the node its capture created."""
        have = self.cols.get(GRAPH_NODES)
        if not have or "originalGraphNodeId" not in have:
            return {}
        direct = {}
        for gtid, node, orig in self.rows.all(
                f"SELECT globalTid, graphNodeId, originalGraphNodeId FROM {GRAPH_NODES} WHERE "
                f"{integers('globalTid', 'graphNodeId', 'originalGraphNodeId')}"):
            direct[(gtid & _PID_MASK, node)] = orig
        out = {}
        for (gpid, node), orig in direct.items():
            seen = {node}
            while (gpid, orig) in direct and orig not in seen:  # a copy of a copy
                seen.add(orig)
                orig = direct[(gpid, orig)]
            out[(gpid, node)] = orig
        return out

    def launches(self) -> Iterator[Launch]:
        """Runtime and driver API calls that started a kernel, memcpy or memset, in start order."""
        if RUNTIME not in self.cols:
            return
        chain = self._col(RUNTIME, "callchainId") if self.launch_sites else as_is("NULL")
        query = self._launch_query(*_LAUNCH_COLUMNS, self._col(RUNTIME, "nameId"), chain)
        if query is None:
            return
        strings = self.strings
        sites = self.callchain_sites() if self.launch_sites else {}
        names: dict = {}

        def calls() -> Iterator[Launch]:
            for start, end, gtid, corr, nid, chain_id in self.rows.stream(query.sql):
                api = names.get(nid)
                if api is None:
                    api = names[nid] = _api_name(strings.get(nid, ""))
                pid = gtid & _PID_MASK
                yield Launch(gtid, start, end, api, (pid, corr), os_pid(gtid), gtid & _TID_MASK, sites.get(chain_id))

        nodes = self._node_rows()
        if nodes is None:
            yield from calls()
            return
        # the same order as launch_times: heapq.merge keeps the calls first on a tie
        created = (Launch(gtid, start, start, GRAPH_NODE_API, ("node", gtid & _PID_MASK, node), os_pid(gtid),
                          gtid & _TID_MASK) for gtid, start, node in nodes)
        yield from heapq.merge(calls(), created, key=_launch_start)

    def callchain_sites(self) -> dict[int, str]:
        """Callchain id -> its innermost user Python frame ``file.py:line`` (nsys_python.callchain_sites), read once."""
        if self._sites is None:
            self._sites = py.callchain_sites(self.rows.stream(
                f"SELECT {integer('id')}, stackDepth, {integer('symbol')}, {integer('module')} FROM {py.CALLCHAINS} "
                "WHERE typeof(id) = 'integer' ORDER BY id, stackDepth"), self.strings)
        return self._sites

    def activities(self) -> Iterator[Activity]:
        """Kernels, memcpys and memsets merged in start order."""
        streams = []
        if KERNEL in self.cols:
            streams.append(self._kernels())
        if MEMCPY in self.cols:
            streams.append(self._copies(MEMCPY))
        if MEMSET in self.cols:
            streams.append(self._copies(MEMSET))
        if len(streams) == 1:
            return streams[0]
        return heapq.merge(*streams, key=_start)

    def _kernel_query(self, node: Column) -> Query:
        """The kernels' query, in start order; ``node``: the graph node column (or NULL) last."""
        return Query((as_is("start"), as_is("end"), *(self._col(KERNEL, c) for c in _KERNEL_COLUMNS), node), KERNEL,
                     _ACTIVITY, order=self._order_by(KERNEL, _VALID_ACTIVITY))

    def native_queries(self) -> tuple | None:
        """What the compiled core reads of this export (native.py): ((the kernels', memcpys' and memsets' queries,
        each None where the table is absent), the launch calls' query or None), as :meth:`activities` and
        :meth:`launches` read them; None where it does not read this export at all: launches with a Python
        backtrace, CUDA graph nodes, ranges with JSON payloads (those take the Python path, whole)."""
        if self.launch_sites or self._node_rows_exist() or (NVTX in self.cols and self.range_query() is None):
            return None
        none = as_is("NULL")
        acts = (self._kernel_query(none) if KERNEL in self.cols else None,
                self._copy_query(MEMCPY, none) if MEMCPY in self.cols else None,
                self._copy_query(MEMSET, none) if MEMSET in self.cols else None)
        name = self._col(RUNTIME, "nameId") if RUNTIME in self.cols else none
        return acts, self._launch_query(*_LAUNCH_COLUMNS, name)

    def _kernels(self) -> Iterator[Activity]:
        node = self._col(KERNEL, "graphNodeId") if self._node_rows_exist() else as_is("NULL")
        sql = self._kernel_query(node).sql
        strings = self.strings
        originals = self._originals() if node != "NULL" else {}
        for (start, end, dev, stream, corr, gpid, long_id, short_id, gx, gy, gz, bx, by, bz, regs, ssm,
             dsm, gnode) in self.rows.stream(sql):
            long_name = strings.get(long_id, "")
            captured = None
            if gnode is not None:  # replayed from a graph: the op is the one around its node's capture
                captured = ("node", gpid, originals.get((gpid, gnode), gnode))
            yield Activity("kernel", start, end, dev, stream, os_pid(gpid), corr, (gpid, corr),
                           long_name, strings.get(short_id, long_name), (gx, gy, gz), (bx, by, bz), regs, ssm,
                           dsm, attribution_key=captured)

    def _node_rows_exist(self) -> bool:
        have = self.cols.get(GRAPH_NODES)
        return bool(have) and {"start", "globalTid", "graphNodeId"} <= have and \
            "graphNodeId" in self.cols.get(KERNEL, ())

    def _copy_query(self, table: str, node: Column) -> Query:
        """A memcpy or memset table's query, in start order; ``node``: the graph node column (or NULL) last."""
        return Query((as_is("start"), as_is("end"), *(self._col(table, c) for c in _COPY_COLUMNS), node), table,
                     _ACTIVITY, order=self._order_by(table, _VALID_ACTIVITY))

    def copy_name(self, table: str, ckind: int | None) -> tuple[str, str | None]:
        """(a memcpy's or memset's name, its copy kind or None) from its table and copyKind."""
        kind = "memcpy" if table == MEMCPY else "memset"
        ck = self._memcpy_kinds().get(ckind, str(ckind)) if table == MEMCPY and ckind is not None else None
        return (f"[CUDA {kind} {ck}]" if ck else f"[CUDA {kind}]"), ck

    def _copies(self, table: str) -> Iterator[Activity]:
        kind = "memcpy" if table == MEMCPY else "memset"
        node = self._col(table, "graphNodeId") if self._node_rows_exist() else as_is("NULL")
        sql = self._copy_query(table, node).sql
        originals = self._originals() if node != "NULL" else {}
        names: dict = {}
        for start, end, dev, stream, corr, gpid, nbytes, ckind, gnode in self.rows.stream(sql):
            named = names.get(ckind)
            if named is None:
                named = names[ckind] = self.copy_name(table, ckind)
            name, ck = named
            captured = None if gnode is None else ("node", gpid, originals.get((gpid, gnode), gnode))
            yield Activity(kind, start, end, dev, stream, os_pid(gpid), corr, (gpid, corr), name, name,
                           bytes=nbytes, copy_kind=ck, attribution_key=captured)

    def _memcpy_kinds(self) -> dict[int, str]:
        return dict(MEMCPY_KINDS)

    def host_intervals(self) -> dict[tuple, tuple]:
        """Steps, DataLoader ranges and op ranges (pyprof's op markers, PyTorch's aten and autograd-node ranges) by
        their text, and every CUDA runtime and driver API call, by process, merged: found by the compiled pass over
        each table (nsys_scan; check() makes it), else read in bulk by pyprof.parse.readers.nsys_host."""
        out: dict = {}
        if NVTX in self.cols:
            ranges = self._host_of(NVTX)
            out.update(nsys_host.ranges_by_category(self.rows, NVTX, "textId" in self.cols[NVTX], _RANGES)
                       if ranges is None else ranges)
        if RUNTIME in self.cols:
            calls = self._host_of(RUNTIME)
            out.update(nsys_host.calls(self.rows, RUNTIME, f"{_VALID_ACTIVITY} AND typeof(globalTid) = 'integer'")
                       if calls is None else calls)
        return out

    def program_marks(self) -> Iterator[tuple]:
        if NVTX not in self.cols or "text" not in self.cols[NVTX]:
            return iter(())
        registered = "textId" in self.cols[NVTX]
        text = "coalesce(e.text, s.value)" if registered else "e.text"
        join = " LEFT JOIN StringIds s ON s.id = e.textId" if registered else ""
        # The prefix holds no LIKE wildcard (% or _); its quotes are doubled for SQL.
        prefix = PROGRAM_MARK_PREFIX.replace("'", "''")
        sql = (f"SELECT e.globalTid, {text} FROM {NVTX} e{join} WHERE typeof(e.globalTid) = 'integer' AND "
               f"{text} LIKE '{prefix}%' ORDER BY e.start")
        return ((os_pid(tid), t) for tid, t in self.rows.all(sql) if isinstance(t, str))

    def _calls_by_process(self) -> dict:
        """pid -> (kernel launch calls, first call start, last call end) over the valid CUDA API calls: one scan."""
        if RUNTIME not in self.cols or "nameId" not in self.cols[RUNTIME]:
            return {}
        # total(): a NULL nameId's test is NULL, and sum() of NULLs alone is NULL, not 0 (fuzz seed 20261205 case 5978)
        sql = (f"SELECT (globalTid >> 24) & {_TID_MASK}, CAST(total(nameId IN (SELECT id FROM StringIds WHERE value "
               f"LIKE '%Launch%')) AS INTEGER), min(start), max(end) FROM {RUNTIME} WHERE {_VALID_LAUNCH} GROUP BY 1")
        if self._calls is None:
            self._calls = {pid: (n, lo, hi) for pid, n, lo, hi in self.rows.all(sql)}
        return self._calls

    def kernel_launches(self) -> dict:
        """pid -> its runtime and driver API calls named like a kernel launch (cudaLaunchKernel, cuLaunchKernel,
        cudaGraphLaunch, ...), for each process with an API call."""
        return {pid: n for pid, (n, _lo, _hi) in self._calls_by_process().items()}

    def profiled_window(self, cut: bool = False) -> tuple[int, int, str] | None:
        """The capture as the export states it: times count from the session's start, and ANALYSIS_DETAILS gives
        the capture's duration (an export without it: the session start to the last API call). ``cut`` (activities
        without their launch call: a cut of a longer capture), or neither table: the first to the last API call."""
        calls = self._calls_by_process().values()
        first = min((lo for _n, lo, _hi in calls), default=None)
        last = max((hi for _n, _lo, hi in calls), default=None)
        if not cut and "duration" in self.cols.get("ANALYSIS_DETAILS", ()):
            rows = self.rows.all("SELECT max(duration) FROM ANALYSIS_DETAILS WHERE typeof(duration) = 'integer'")
            if rows and rows[0][0] is not None and rows[0][0] > 0:
                return 0, int(rows[0][0]), "capture"
        if last is None:
            return None
        if not cut and "TARGET_INFO_SESSION_START_TIME" in self.cols:
            return 0, last, "session to last API call"
        return first, last, "API calls"

    def _host_of(self, table: str) -> dict | None:
        """The compiled pass's host intervals of ``table``, handed over (not kept here); None where it takes no part."""
        facts = self._facts(table, host=True)
        if facts is None:
            return None
        self._scanned[table] = facts._replace(host=None)
        return facts.host

    def memory_events(self) -> Iterator[MemoryEvent]:
        """cudaMalloc / cudaFree and their kin (``--cuda-memory-usage=true``), in the order of the API calls that
        made them: each joined to its runtime call (thread and time) by correlation id. nsys reports what a
        process held when a ranged capture began as allocations at time 0 with no call in the export: those
        come first, outside every range."""
        have = self.cols.get(MEMORY)
        if not have or not all(c in have for c in _MEMORY_COLUMNS) or RUNTIME not in self.cols:
            return iter(())
        addr = "m.address" if "address" in have else "NULL"
        sql = (f"SELECT r.globalTid, r.start, m.start, m.globalPid, {integer('m.deviceId')}, m.bytes, "
               f"{integer('m.memKind')}, m.memoryOperationType, {integer(addr)} FROM {MEMORY} m "
               f"LEFT JOIN {RUNTIME} r ON r.correlationId = m.correlationId AND m.correlationId != 0 "
               f"AND (r.globalTid & {_PID_MASK}) = m.globalPid AND {_VALID_CALL} "
               f"WHERE {integers('m.start', 'm.globalPid', 'm.bytes', 'm.memoryOperationType')} "
               f"ORDER BY r.start IS NOT NULL, COALESCE(r.start, m.start), m.rowid")
        return self._memory_rows(sql)

    def _memory_rows(self, sql: str) -> Iterator[MemoryEvent]:
        for tid, call, t, gpid, dev, size, kind, oper, addr in self.rows.stream(sql):
            device = "host" if kind in _HOST_KINDS else f"cuda:{dev}"
            yield MemoryEvent(tid, call, t, os_pid(gpid), device, "driver", -size if oper == _FREE else size,
                              None, None, addr)

    def close(self) -> None:
        """Close the database, and let go of what the compiled pass found (host intervals not handed over yet)."""
        self._scanned.clear()
        super().close()


def _start(a: Activity) -> int:
    return a.start_ns


def _launch_start(x: Launch) -> int:
    return x.start_ns


def _second(row: tuple) -> int:
    return row[1]


def _api_name(name: str) -> str:
    """cudaLaunchKernel_v7000 -> cudaLaunchKernel (the suffix is the API version, not part of the name)."""
    base, sep, ver = name.rpartition("_v")
    return base if sep and ver.isdigit() else name
