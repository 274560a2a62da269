"""Small hand-made inputs for the regression test of each class of issue 13: an Nsight Systems export with one
marked op, one launch and one kernel; a Kineto trace of the same; three records lines. Each test then breaks
one thing in it."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

PID, TID = 42, 43
GTID = (PID << 24) | TID
MARKER = '{"pyprof":1,"mod":"torch","op":"mm","args":[{"type":"tensor","shape":[4,8],"dtype":"float32"},' \
         '{"type":"tensor","shape":[8,2],"dtype":"float32"}],"site":"net.py:7"}'


def nsys(path: Path, marker: str = MARKER) -> Path:
    """An export of the 2025/2026 layout: one GPU, an NVTX range holding one cudaLaunchKernel, its kernel."""
    db = sqlite3.connect(path)
    db.executescript(f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER,
            streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER,
            mangledName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER,
            blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER,
            graphNodeId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER,
            correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER,
            color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, smCount INTEGER, totalMemory INTEGER);
        CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
        INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.25.0');
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'void gemm<float>(float*)'), (3, 'gemm');
        INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100 80GB HBM3', 132, 85899345920);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1000, 1100, 0, {GTID}, 7, 1, 0, NULL);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (2000, 2500, 0, 1, 7, 7, {PID << 24}, 2, 3, NULL,
            4, 1, 1, 128, 1, 1, 32, 0, 1024, NULL);
    """)
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES "
               "(900, 1200, 59, ?, ?, 0)", (marker, GTID))
    db.commit()
    db.close()
    return path


def kineto_events() -> dict:
    """A Kineto trace: one aten::mm op, its cudaLaunchKernel, the kernel and the flow between them."""
    return {
        "schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000,
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": PID, "tid": TID, "ts": 100.0, "dur": 20.0,
             "args": {"External id": 5, "Sequence number": 3, "Fwd thread id": 0, "Input Dims": [[4, 8], [8, 2]],
                      "Input type": ["float", "float"]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID, "ts": 105.0,
             "dur": 5.0, "args": {"External id": 5, "cbid": 211, "correlation": 7}},
            {"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0, "tid": 7, "ts": 130.0,
             "dur": 2.5, "args": {"External id": 5, "device": 0, "stream": 7, "correlation": 7,
                                  "grid": [4, 1, 1], "block": [128, 1, 1], "registers per thread": 32,
                                  "shared memory": 1024}},
            {"ph": "s", "id": 7, "pid": PID, "tid": TID, "ts": 105.0, "cat": "ac2g", "name": "ac2g"},
            {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 130.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]}


def kineto(path: Path, data: dict | None = None, text: str | None = None, gz: bool = False,
           prefix: bytes = b"") -> Path:
    raw = prefix + (text if text is not None else json.dumps(data or kineto_events())).encode("utf-8",
                                                                                             "surrogateescape")
    path.write_bytes(gzip.compress(raw, mtime=0) if gz else raw)
    return path


def record(**over) -> dict:
    """One record as parse writes it (the keys prof and report read), with ``over`` replacing keys."""
    d = {"kind": "kernel", "kShortName": "gemm", "kLongName": "void gemm<float>(float*)", "kDuration": 500,
         "start_ns": 2000, "end_ns": 2500, "pid": PID, "tid": TID, "device": 0, "stream": 7, "correlation_id": 7,
         "grid": [4, 1, 1], "block": [128, 1, 1], "registers": 32, "static_smem_bytes": 0,
         "dynamic_smem_bytes": 1024, "smem_bytes": 1024, "est_occupancy_pct": None, "gpu": "NVIDIA H100 80GB HBM3",
         "gpu_props": None, "api": "cudaLaunchKernel", "api_start_ns": 1000, "api_end_ns": 1100, "bytes": None,
         "copy_kind": None, "layer": ["Net", "fc"], "trace": ["net.py:7"], "reprMarkers": [], "marker": [],
         "seqMarker": [], "seqId": [3], "subSeqId": 0, "altSeqId": [], "dir": "fprop", "recompute": False,
         "mod": ["torch"], "op": ["mm"],
         "args": [{"type": "tensor", "shape": [4, 8], "dtype": "float32"},
                  {"type": "tensor", "shape": [8, 2], "dtype": "float32"}],
         "outputs": [], "callsite": "net.py:7", "fwd": None, "ranges": ["Net", "fc"], "schema": 1}
    d.update(over)
    return d


def records(path: Path, *lines) -> Path:
    """A records file of these lines (dicts are written as JSON, strings as they are)."""
    with open(path, "w", encoding="utf-8") as f:
        for line in lines or (record(), record(op=["relu"], kShortName="relu"), record(dir="bprop")):
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


def legacy(path: Path, **over) -> Path:
    """One line of the original PyProf's dict format (Python literals), with ``over`` replacing keys."""
    d = {"kShortName": "gemm", "kDuration": 500, "layer": [], "trace": [], "reprMarkers": [],
         "marker": ["{'mod': 'torch', 'op': 'mm', 'args': [{'name': '', 'type': 'tensor', 'shape': (4, 8), "
                    "'dtype': 'float32'}]}"], "seqMarker": [], "seqId": [], "subSeqId": 0, "altSeqId": [],
         "dir": "fprop", "mod": ["torch"], "op": ["mm"], "tid": TID, "device": 0, "stream": 7,
         "grid": (4, 1, 1), "block": (128, 1, 1), "kLongName": "void gemm<float>(float*)"}
    # ``over`` holds raw Python source for the value: sets, 1j, bytes ... are the point.
    items = [f"{k!r}: {over.get(k, repr(v))}" for k, v in d.items()] + [f"{k!r}: {v}" for k, v in over.items()
                                                                        if k not in d]
    text = "{" + ", ".join(items) + "}"
    path.write_text(text + "\n", encoding="utf-8")
    return path
