"""Helpers of the parse tests: the corpus location, and builders of small synthetic exports for unit tests
of decoding and attribution.

A builder makes the smallest input that exercises one rule at a time (a range nesting, a marker form, a broken
row); what real captures do is tested on them: the H200 captures of our examples under tests/data (pyprof
markers, emit_nvtx, Kineto traces) and the shared corpus of other people's profiles.
"""
from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

#: The shared corpus of real exports (../shared/corpus next to the repository), when present.
from shared_files import CORPUS  # noqa: E402  (where ../shared is, said once)


def parse_outcome(path: Path, raw_markers: bool = False) -> tuple:
    """(parse's output, its Stats' counts), or ("error", the one line): what the tests compare between the ways of
    parsing one file (the caller sets the environment that picks the way)."""
    from pyprof.common import InputError
    from pyprof.parse import parse_file

    out = io.StringIO()
    try:
        stats = parse_file(str(path), out, raw_markers=raw_markers)
    except InputError as e:
        return ("error", str(e))
    return out.getvalue(), vars(stats)


def gtid(pid: int, tid: int) -> int:
    """An nsys globalTid: thread bits 0-23, process bits 24-47."""
    return (pid << 24) | tid


class NsysBuilder:
    """Writes a minimal Nsight Systems SQLite export with the columns of a 2025/2026 schema."""

    def __init__(self, path: Path, payload_column: bool = True, meta_table: str | None = "META_DATA_EXPORT"):
        self.path = path
        self.db = sqlite3.connect(path)
        payload = ", int64Value INTEGER" if payload_column else ""
        self.db.executescript(f"""
            CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,
                contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
                demangledName INTEGER, shortName INTEGER, mangledName INTEGER, gridX INTEGER, gridY INTEGER,
                gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER,
                staticSharedMemory INTEGER, dynamicSharedMemory INTEGER, graphNodeId INTEGER);
            CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER,
                contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER,
                copyKind INTEGER, srcKind INTEGER, dstKind INTEGER);
            CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER,
                globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER,
                callchainId INTEGER);
            CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER,
                category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
                textId INTEGER, domainId INTEGER{payload});
            CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, smCount INTEGER, totalMemory INTEGER);
        """)
        if meta_table:
            self.db.execute(f"CREATE TABLE {meta_table} (name TEXT, value TEXT)")
            self.db.execute(f"INSERT INTO {meta_table} VALUES ('EXPORT_SCHEMA_VERSION', '3.25.0')")
        self.payload_column = payload_column
        self._ids: dict[str, int] = {}

    def string(self, s: str) -> int:
        if s not in self._ids:
            self._ids[s] = len(self._ids) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self._ids[s], s))
        return self._ids[s]

    def gpu(self, dev: int, name: str, sms: int = 132) -> None:
        self.db.execute("INSERT INTO TARGET_INFO_GPU VALUES (?, ?, ?, ?)", (dev, name, sms, 80 << 30))

    def range(self, pid: int, tid: int, start: int, end: int | None, text: str, registered: bool = False,
              payload: int | None = None, domain: int = 0, event_type: int = 59) -> None:
        cols = "start, end, eventType, text, globalTid, textId, domainId"
        vals = [start, end, event_type, None if registered else text, gtid(pid, tid),
                self.string(text) if registered else None, domain]
        if self.payload_column:
            cols += ", int64Value"
            vals.append(payload)
        self.db.execute(f"INSERT INTO NVTX_EVENTS ({cols}) VALUES ({', '.join('?' * len(vals))})", vals)

    def launch(self, pid: int, tid: int, start: int, end: int, corr: int, api: str = "cudaLaunchKernel_v7000",
               event_class: int = 0) -> None:
        self.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, 0, NULL)",
                        (start, end, event_class, gtid(pid, tid), corr, self.string(api)))

    def kernel(self, pid: int, start: int, end: int, corr: int, name: str = "void k<float>(float*)",
               short: str = "k", device: int = 0, stream: int = 7) -> None:
        self.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, NULL, "
                        "4, 1, 1, 128, 1, 1, 32, 0, 1024, NULL)",
                        (start, end, device, stream, corr, pid << 24, self.string(name), self.string(short)))

    def memcpy(self, pid: int, start: int, end: int, corr: int, nbytes: int, kind: int = 1) -> None:
        self.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, ?, ?, ?, ?, 0, 0)",
                        (start, end, corr, pid << 24, nbytes, kind))

    def close(self) -> Path:
        self.db.commit()
        self.db.close()
        return self.path


def pyprof_op(mod: str, op: str, args: list, site: str) -> str:
    """A pyprof v1 op marker text as docs/markers.md specifies it (compact JSON)."""
    return json.dumps({"pyprof": 1, "mod": mod, "op": op, "args": args, "site": site}, separators=(",", ":"))


def pyprof_module(name: str, type_: str) -> str:
    return json.dumps({"pyprof": 1, "module": name, "type": type_}, separators=(",", ":"))
