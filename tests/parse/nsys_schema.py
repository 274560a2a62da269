"""Small Nsight Systems exports built with sqlite3 from NVIDIA's documented export schema, for what the GPU machine's
nsys (2025.3.1) could not capture: ``--pytorch=functions-trace-shapes`` (nsys 2026.4) and ``--python-backtrace=cuda``.

The tables and their columns, in order, are those of the SQLite Schema Reference of the 2026.4 release (export
schema 3.28.1; https://docs.nvidia.com/nsight-systems/AnalysisGuide/index.html#sqlite-schema-reference): NVTX_EVENTS
with its payload union (jsonTextId, jsonText), binaryData and eventId, CUPTI_ACTIVITY_KIND_RUNTIME.callchainId
referencing CUDA_CALLCHAINS(id), and CUDA_CALLCHAINS with PRIMARY KEY (id, stackDepth). What the schema leaves open
is the builder's choice, said where it is made.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = "3.28.1"
PID, TID = 4242, 4243
GTID = (PID << 24) | TID

_TABLES = """
CREATE TABLE StringIds (
    id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (
    name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (
    vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
    l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
    cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
    gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
    sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER,
    qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, graphId INTEGER,
    clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER,
    maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER,
    tensorSizeMinusOneElements TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
    correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUDA_CALLCHAINS (
    id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, unresolved INTEGER,
    originalIP INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,
    color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER,
    uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
    floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT, eventId INTEGER NOT NULL PRIMARY KEY);
"""


class Export2026:
    """An export of the 2026.4 schema: ranges on one thread, launches with their kernels, call stacks."""

    def __init__(self, path: Path):
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.executescript(_TABLES)
        self.db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', ?)", (SCHEMA_VERSION,))
        self.db.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, smCount, totalMemory) "
                        "VALUES (0, 0, 'NVIDIA H100 80GB HBM3', 132, 85899345920)")
        self._ids: dict[str, int] = {}
        self._events = 0

    def string(self, s: str) -> int:
        if s not in self._ids:
            self._ids[s] = len(self._ids) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self._ids[s], s))
        return self._ids[s]

    def range(self, start: int, end: int, text: str, json_text: str | None = None,
              json_registered: str | None = None, binary: str | None = None) -> None:
        """A push/pop range (eventType 59) with, optionally, its payload exported as JSON text (``jsonText``), as a
        registered string (``jsonTextId``) or as binary data (``binaryData``, left as given: its format is not in
        the schema)."""
        self._events += 1
        self.db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, jsonTextId, jsonText, "
            "binaryData, eventId) VALUES (?, ?, 59, ?, ?, 0, ?, ?, ?, ?)",
            (start, end, text, GTID, None if json_registered is None else self.string(json_registered), json_text,
             binary, self._events))

    def launch(self, start: int, end: int, corr: int, kernel_start: int, callchain: int | None = None,
               kernel: str = "ampere_sgemm_128x64_tn") -> None:
        """A cudaLaunchKernel call and the kernel it started, the call's stack ``callchain`` (an id of
        :meth:`callchain`) or none."""
        self.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, ?, 0, ?)",
                        (start, end, GTID, corr, self.string("cudaLaunchKernel_v7000"), callchain))
        name = self.string(kernel)
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
            "staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, "
            "tensorSizeMinusOneElements) VALUES (?, ?, 0, 1, 7, ?, ?, ?, ?, 32, 4, 1, 1, 128, 1, 1, 0, 1024, 0, 0, ?, "
            "'')", (kernel_start, kernel_start + 500, corr, PID << 24, name, name, corr))

    def callchain(self, chain: int, frames: list[tuple[str, str]]) -> None:
        """A call stack, innermost frame first (stackDepth 0 is the innermost, as the schema's example shows: the
        CUDA call's own frame at 0, ``main`` and ``_start`` last); each frame (symbol, module)."""
        for depth, (symbol, module) in enumerate(frames):
            self.db.execute("INSERT INTO CUDA_CALLCHAINS (id, symbol, module, stackDepth) VALUES (?, ?, ?, ?)",
                            (chain, self.string(symbol), self.string(module), depth))

    def close(self) -> Path:
        self.db.commit()
        self.db.close()
        return self.path
