"""NvProf SQLite exports (``nvprof -o net.sql``): rows -> the intermediate model.

Differences from nsys handled here: kernel names are StringTable ids of mangled names; launch calls have
a separate process id and a signed 32-bit thread id; NVTX ranges are start/end row pairs in the MARKER
table whose ``objectId`` blob holds the thread; there is one process per file in practice, so launches
join to kernels on the correlation id alone.
"""
from __future__ import annotations

import heapq
import struct
from typing import Iterator

from pyprof.common import InputError
from pyprof.parse.readers.demangle import demangle, short_name
from pyprof.parse.readers.activities import Activity, GpuInfo, Launch
from pyprof.parse.readers.nsys import MEMCPY_KINDS
from pyprof.parse.readers.sqlrows import SqliteSource, integer, integers, timed

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL")
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
DRIVER = "CUPTI_ACTIVITY_KIND_DRIVER"
MARKER = "CUPTI_ACTIVITY_KIND_MARKER"
MARKER_START, MARKER_END = 2, 4

# CUPTI callback ids (cupti_runtime_cbid.h / cupti_driver_cbid.h) of the calls that start GPU work, for
# the record's ``api``; any other id is kept as a number.
RUNTIME_API = {13: "cudaLaunch", 31: "cudaMemcpy", 32: "cudaMemcpy2D", 41: "cudaMemcpyAsync",
               44: "cudaMemcpy2DAsync", 49: "cudaMemset", 50: "cudaMemset2D", 51: "cudaMemsetAsync",
               52: "cudaMemset2DAsync", 144: "cudaMemcpy3D", 145: "cudaMemcpy3DAsync", 160: "cudaMemcpyPeer",
               161: "cudaMemcpyPeerAsync", 211: "cudaLaunchKernel", 214: "cudaLaunchKernel_ptsz",
               215: "cudaMemcpy_ptds", 225: "cudaMemcpyAsync_ptsz", 233: "cudaMemset_ptds",
               235: "cudaMemsetAsync_ptsz", 269: "cudaLaunchCooperativeKernel", 311: "cudaGraphLaunch",
               312: "cudaGraphLaunch_ptsz", 430: "cudaLaunchKernelExC"}
DRIVER_API = {115: "cuLaunch", 116: "cuLaunchGrid", 117: "cuLaunchGridAsync", 305: "cuMemcpy",
              306: "cuMemcpyAsync", 307: "cuLaunchKernel", 442: "cuLaunchKernel_ptsz",
              477: "cuLaunchCooperativeKernel", 514: "cuGraphLaunch", 652: "cuLaunchKernelEx"}


class NvprofSource(SqliteSource):
    """Reader of one nvprof SQLite export. Raises InputError on open if the file is not one."""

    format = "nvprof"

    def __init__(self, path: str, display: str | None = None):
        super().__init__(path, display)
        self.cols = {t: {r[1] for r in self.rows.all(f"PRAGMA table_info('{t}')")}
                     for (t,) in self.rows.all("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self.kernel_table = next((t for t in KERNEL_TABLES if t in self.cols
                                  and self.rows.all(f"SELECT 1 FROM {t} LIMIT 1")),
                                 next((t for t in KERNEL_TABLES if t in self.cols), None))
        self._strings: dict[int, str] | None = None
        self._calls: dict | None = None  # _calls_by_process, once

    @property
    def strings(self) -> dict[int, str]:
        """StringTable as a dict."""
        if self._strings is None:
            if not {"_id_", "value"} <= self.cols.get("StringTable", set()):
                raise InputError(self.path, "table StringTable lacks its _id_/value columns")
            self._strings = {i: str(v) for i, v in self.rows.stream("SELECT _id_, value FROM StringTable")
                             if v is not None}
        return self._strings

    def check(self) -> None:
        """Read the last row of each table used, so that a truncated file fails before any output, and count the
        rows whose times or ids are unusable (they are left out)."""
        for t in (*KERNEL_TABLES, MEMCPY, MEMSET, RUNTIME, DRIVER, MARKER, "StringTable"):
            if t in self.cols:
                self.rows.last_row(t)
        if self.kernel_table and not {"start", "end", "correlationId", "name"} <= self.cols[self.kernel_table]:
            raise InputError(self.path, f"table {self.kernel_table} lacks the start/end/correlationId/name columns")
        self.strings  # a StringTable without its columns is refused here, before any output
        for t, needed in ((self.kernel_table, ("start", "end")), (MEMCPY, ("start", "end")),
                          (MEMSET, ("start", "end")), (RUNTIME, ("start", "end", "correlationId")),
                          (DRIVER, ("start", "end", "correlationId"))):
            if t and t in self.cols:
                if not set(needed) <= self.cols[t]:
                    raise InputError(self.path, f"table {t} lacks columns {[c for c in needed if c not in self.cols[t]]}")
                self.rows.skip(f"rows of {t} with a start, end or id that is not an integer, left out",
                               self.rows.count(f"SELECT count(*) FROM {t} WHERE NOT ({_valid(needed)})"))

    def gpus(self) -> dict[int, GpuInfo]:
        """GPU name and a few properties by device id."""
        t = "CUPTI_ACTIVITY_KIND_DEVICE"
        if t not in self.cols or not {"id", "name"} <= self.cols[t]:
            return {}
        props = [c for c in ("numMultiprocessors", "globalMemorySize", "globalMemoryBandwidth", "coreClockRate",
                             "computeCapabilityMajor", "computeCapabilityMinor", "l2CacheSize") if c in self.cols[t]]
        out = {}
        cols = "".join(f", {integer(c)}" for c in props)
        for row in self.rows.all(f"SELECT id, name{cols} FROM {t} WHERE typeof(id) = 'integer'"):
            name = self.strings.get(row[1]) if type(row[1]) is int else row[1]
            out[row[0]] = GpuInfo(None if name is None else str(name), dict(zip(props, row[2:])))
        return out

    def ranges(self) -> Iterator[tuple]:
        """NVTX ranges from start/end marker pairs (flags 2 and 4 with equal id), in start order."""
        if MARKER not in self.cols:
            return
        if not {"timestamp", "id", "flags", "objectId", "name"} <= self.cols[MARKER]:
            return
        sql = (f"SELECT s.timestamp, e.timestamp, s.objectId, s.name FROM {MARKER} s JOIN {MARKER} e "
               f"ON e.id = s.id AND e.flags = {MARKER_END} WHERE s.flags = {MARKER_START} "
               f"AND typeof(s.timestamp) = 'integer' AND typeof(e.timestamp) = 'integer' "
               f"AND e.timestamp >= s.timestamp ORDER BY s.timestamp, e.timestamp DESC")
        strings = self.strings
        for start, end, obj, name_id in self.rows.stream(sql):
            pid, tid = _object_thread(obj)
            yield ((pid, tid), start, end, strings.get(name_id), None)

    @staticmethod
    def process_of(thread: tuple) -> object:
        """The process of a range's thread, ``(pid, tid)``."""
        return thread[0]

    def launches(self) -> Iterator[Launch]:
        """Runtime and driver API calls that started GPU work, in start order (runtime wins a tie)."""
        work = [f"SELECT correlationId FROM {t}" for t in (self.kernel_table, MEMCPY, MEMSET)
                if t and t in self.cols and "correlationId" in self.cols[t]]
        if not work:
            return
        streams = []
        for table, names in ((RUNTIME, RUNTIME_API), (DRIVER, DRIVER_API)):
            if table in self.cols:
                c = lambda col, t=table: integer(col) if col in self.cols[t] else "NULL"  # noqa: E731
                sql = (f"SELECT start, end, {c('processId')}, {c('threadId')}, correlationId, {c('cbid')} "
                       f"FROM {table} WHERE {_valid(('start', 'end', 'correlationId'))} "
                       f"AND correlationId IN ({' UNION '.join(work)}) ORDER BY start"
                       f"{'' if self.rows.without_rowid(table) else ', rowid'}")
                streams.append(self._launch_rows(sql, names, table == DRIVER))
        yield from heapq.merge(*streams, key=lambda launch: launch.start_ns)

    def _launch_rows(self, sql: str, names: dict, driver: bool) -> Iterator[Launch]:
        for start, end, pid, tid, corr, cbid in self.rows.stream(sql):
            if tid is not None:
                tid &= 0xFFFFFFFF  # stored signed
            api = names.get(cbid) or (f"driver_cbid_{cbid}" if driver else f"runtime_cbid_{cbid}")
            # Kernels launched through the driver API alone (cuLaunchKernel) join a driver row; CUPTI gives
            # the driver calls made inside a runtime call ids of their own, so the keys do not collide.
            yield Launch((pid, tid), start, end, api, corr, pid, tid)

    def _calls_by_process(self) -> dict:
        """(table, pid) -> (kernel launch calls, first call start, last call end) of the runtime and driver API calls
        with a process id, once."""
        if self._calls is None:
            self._calls = {}
            for table, names in ((RUNTIME, RUNTIME_API), (DRIVER, DRIVER_API)):
                if table in self.cols and {"processId", "cbid"} <= self.cols[table]:
                    launch = ",".join(str(cbid) for cbid, name in names.items() if "Launch" in name)
                    sql = (f"SELECT processId, sum(cbid IN ({launch})), min(start), max(end) FROM {table} "
                           f"WHERE {_valid(('start', 'end', 'processId'))} GROUP BY 1")
                    self._calls.update({(table, pid): row for pid, *row in self.rows.all(sql)})
        return self._calls

    def kernel_launches(self) -> dict:
        """pid -> its runtime API calls that launch a kernel (cudaLaunch, cudaLaunchKernel, cudaGraphLaunch, ...);
        the driver's (cuLaunchKernel, ...) for a process with no runtime call: a runtime launch makes a driver
        call of its own, which would count it twice."""
        out: dict = {}
        for (table, pid), (n, _lo, _hi) in sorted(self._calls_by_process().items(), key=lambda kv: kv[0][0] != RUNTIME):
            if table == RUNTIME or pid not in out:
                out[pid] = n
        return out

    def profiled_window(self, cut: bool = False) -> tuple[int, int, str] | None:
        """The first to the last CUDA API call: an nvprof export states no capture bounds."""
        calls = self._calls_by_process().values()
        if not calls:
            return None
        return min(lo for _n, lo, _hi in calls), max(hi for _n, _lo, hi in calls), "API calls"

    def activities(self) -> Iterator[Activity]:
        """Kernels, memcpys and memsets merged in start order."""
        streams = []
        if self.kernel_table:
            streams.append(self._kernels())
        for t in (MEMCPY, MEMSET):
            if t in self.cols:
                streams.append(self._copies(t))
        return heapq.merge(*streams, key=lambda a: a.start_ns)

    def _kernels(self) -> Iterator[Activity]:
        t = self.kernel_table
        c = lambda col: integer(col) if col in self.cols[t] else "NULL"  # noqa: E731
        sql = (f"SELECT start, end, {c('deviceId')}, {c('streamId')}, {c('correlationId')}, name, {c('gridX')}, "
               f"{c('gridY')}, {c('gridZ')}, {c('blockX')}, {c('blockY')}, {c('blockZ')}, {c('registersPerThread')}, "
               f"{c('staticSharedMemory')}, {c('dynamicSharedMemory')} FROM {t} WHERE {_valid(('start', 'end'))} "
               f"ORDER BY start")
        strings = self.strings
        names: dict = {}
        for start, end, dev, stream, corr, nid, gx, gy, gz, bx, by, bz, regs, ssm, dsm in self.rows.stream(sql):
            nm = names.get(nid)
            if nm is None:
                long_name = demangle(strings.get(nid, ""))
                nm = names[nid] = (long_name, short_name(long_name))
            yield Activity("kernel", start, end, dev, stream, None, corr, corr, nm[0], nm[1], (gx, gy, gz),
                           (bx, by, bz), regs, ssm, dsm)

    def _copies(self, table: str) -> Iterator[Activity]:
        kind = "memcpy" if table == MEMCPY else "memset"
        c = lambda col: integer(col) if col in self.cols[table] else "NULL"  # noqa: E731
        sql = (f"SELECT start, end, {c('deviceId')}, {c('streamId')}, {c('correlationId')}, {c('bytes')}, "
               f"{c('copyKind')} FROM {table} WHERE {_valid(('start', 'end'))} ORDER BY start")
        for start, end, dev, stream, corr, nbytes, ckind in self.rows.stream(sql):
            ck = MEMCPY_KINDS.get(ckind, str(ckind)) if kind == "memcpy" and ckind is not None else None
            name = f"[CUDA {kind} {ck}]" if ck else f"[CUDA {kind}]"
            yield Activity(kind, start, end, dev, stream, None, corr, corr, name, name, bytes=nbytes, copy_kind=ck)


def _valid(cols: tuple) -> str:
    """SQL: the row's ``cols`` hold integers, its end is not before its start, its duration a record's integer."""
    return integers(*cols) + " AND " + timed("start", "end")


def _object_thread(obj: bytes | None) -> tuple[int | None, int | None]:
    """(pid, tid) from a marker's objectId blob: little-endian uint32 pid, then uint32 tid."""
    if isinstance(obj, (bytes, bytearray)) and len(obj) >= 8:
        return struct.unpack_from("<II", obj)
    return None, None
