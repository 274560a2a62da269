"""The memory view on real captures with memory events (tests/data/paths, made on the H200): its peak against
torch.cuda.max_memory_allocated() / max_memory_reserved() of the same run, its events and bytes against a recount
of the trace or a sqlite3 recount of the export, and damaged memory lines refused with one line."""
from __future__ import annotations

import gzip
import json
import lzma
import sqlite3
import subprocess
import sys

import pytest
from report_helpers import ROOT

from pyprof.common import InputError
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.memory_timeline import MemoryRun, timelines
from pyprof.prof.views import build

PATHS = ROOT / "tests" / "data" / "paths"
MIB = 2 ** 20


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """``parsed(name)``: the path of parse's output for tests/data/paths/NAME (cached)."""
    tmp = tmp_path_factory.mktemp("memory")
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            out = tmp / (name + ".jsonl")
            with open(out, "wb") as f:
                p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(PATHS / name)], stdout=f,
                                   stderr=subprocess.PIPE, cwd=ROOT)
            assert p.returncode == 0, p.stderr.decode()[-500:]
            cache[name] = (out, p.stderr.decode())
        return cache[name]
    return get


def _tables(path):
    summary, sites = build(aggregate_files([str(path)]), ["memory"])
    return ([dict(zip(summary.columns, r)) for r in summary.rows], [dict(zip(sites.columns, r)) for r in sites.rows],
            summary)


def _trace_memory(name: str) -> list[dict]:
    with gzip.open(PATHS / name) as f:
        return [e["args"] for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]


@pytest.mark.parametrize("name,reference", [("kineto_full.pt.trace.json.gz", "memory_kineto.json"),
                                            ("lightning.pt.trace.json.gz", "memory_lightning.json")])
def test_peak_is_torch_max_memory_allocated_of_the_same_run(parsed, name, reference):
    out, stderr = parsed(name)
    ref = json.loads((PATHS / reference).read_text())
    tls = {t.device: t for w in aggregate_files([str(out)]).workers.values() for t in timelines(w.memory)}
    gpu = tls["cuda:0"]
    # the runs reset the peak before the profiled steps: the allocator's highest total in them is the run's peak
    assert int(gpu.allocated.max()) == ref["max_memory_allocated"]
    assert int(gpu.reserved.max()) == ref["max_memory_reserved"]
    raw = _trace_memory(name)
    # every [memory] event of the trace is in the records' memory lines, and nothing else
    assert len(raw) == sum(len(t.t_ns) for t in tls.values())
    assert f"{len(raw)} memory events" in stderr
    cuda = [a for a in raw if a["Device Type"] == 1]
    assert int(gpu.bytes[gpu.bytes > 0].sum()) == sum(a["Bytes"] for a in cuda if a["Bytes"] > 0)
    rows, sites, _t = _tables(out)
    row = next(r for r in rows if r["device"] == "cuda:0")
    assert row["peak_mib"] == round(ref["max_memory_allocated"] / MIB, 1)
    # what held the peak adds up to it: the window's live allocations by op and line, and what came before
    held = sum(s["held_mib"] for s in sites if s["device"] == "cuda:0")
    assert held == pytest.approx(ref["max_memory_allocated"] / MIB, abs=0.05 * len(sites))
    allocated = sum(s["allocated_mib"] for s in sites if s["device"] == "cuda:0")
    assert allocated == pytest.approx(sum(a["Bytes"] for a in cuda if a["Bytes"] > 0) / MIB, abs=0.05 * len(sites))


def test_kineto_peak_is_held_by_the_loss_and_its_gradient(parsed):
    # The transformer's largest tensors: logits of 8 x 511 x 32000 in bf16 = 261,632,000 B (249.5 MiB); the loss
    # upcasts them to fp32 (cross_entropy: 499 MiB), and its backward makes their gradient. At the peak those are
    # alive, allocated at the loss's line (transformer.py:55) and the head's (transformer.py:42).
    out, _ = parsed("kineto_full.pt.trace.json.gz")
    rows, sites, _t = _tables(out)
    row = next(r for r in rows if r["device"] == "cuda:0")
    assert row["peak_line"] == "transformer.py:55" and row["peak_op"] == "cross_entropy_loss (bprop)"
    top = [(s["op"], s["line"]) for s in sites[:4]]
    assert top[0] == ("(before the window)", "-")
    assert set(top[1:]) == {("cross_entropy_loss (bprop)", "transformer.py:55"),
                            ("cross_entropy_loss", "transformer.py:55"), ("linear", "transformer.py:42")}
    head = next(s for s in sites if s["op"] == "linear" and s["line"] == "transformer.py:42")
    # 261,632,000 B, which the caching allocator rounds up to its 2 MiB granularity for large blocks: 125 x 2 MiB
    assert -(-8 * 511 * 32000 * 2 // (2 * MIB)) == 125
    assert head["held_mib"] == 125 * 2.0


def test_nsys_cuda_memory_usage_counts_the_driver(parsed, tmp_path):
    # nsys --cuda-memory-usage=true sees cudaMalloc/cudaFree: what the caching allocator reserves, and other
    # libraries' allocations besides. The run's allocator held max_memory_reserved at most; the export's own
    # running sum (a sqlite3 recount) is the view's peak.
    out, _ = parsed("nsys_cuda_memory_usage.sqlite.xz")
    db = tmp_path / "m.sqlite"
    db.write_bytes(lzma.decompress((PATHS / "nsys_cuda_memory_usage.sqlite.xz").read_bytes()))
    con = sqlite3.connect(db)
    total = peak = 0
    for size, oper in con.execute("SELECT bytes, memoryOperationType FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
                                  "WHERE memKind NOT IN (0, 1) ORDER BY start, rowid"):
        total += size if oper == 0 else -size
        peak = max(peak, total)
    con.close()
    rows, _sites, _t = _tables(out)
    row = next(r for r in rows if r["device"] == "cuda:0")
    assert row["level"] == "driver" and row["peak_mib"] == round(peak / MIB, 1)
    ref = json.loads((PATHS / "memory_nsys.json").read_text())
    # 2,605,209,928 B from the driver against 2,470,445,056 B reserved by the allocator: 5.5% more
    assert ref["max_memory_reserved"] <= peak <= 1.06 * ref["max_memory_reserved"]


def test_records_without_memory_events_say_how_to_record_them(records):
    from pyprof.prof.aggregate import aggregate

    summary, sites = build(aggregate([("x", records("nsys/pyprof/transformer.sqlite.xz"))]), ["memory"])
    assert summary.rows == [] and sites.rows == []
    assert "profile_memory=True" in summary.empty


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(site=[10 ** 6] * len(d["site"])), "site: an index outside sites"),
    (lambda d: d["bytes"].pop(), "bytes: expected a list as long as t_ns"),
    (lambda d: d.update(level="heap"), "pid, device or level"),
    (lambda d: d["t_ns"].__setitem__(0, "soon"), "t_ns: expected integers"),
    (lambda d: d.update(sites=["x"]), "sites: expected a list of objects"),
])
def test_a_damaged_memory_line_is_one_error_naming_its_line(parsed, tmp_path, change, message):
    out, _ = parsed("kineto_full.pt.trace.json.gz")
    lines = out.read_bytes().splitlines()
    k = next(i for i, x in enumerate(lines) if x.startswith(b'{"pyprof_side":"memory"'))
    d = json.loads(lines[k])
    change(d)
    lines[k] = json.dumps(d).replace(" ", "").encode()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError, match=f"line {k + 1}: a damaged memory line") as e:
        aggregate_files([str(bad)])
    assert message in str(e.value)
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "--view", "memory", str(bad)], capture_output=True,
                       cwd=ROOT)
    assert p.returncode == 1 and p.stdout == b"" and len(p.stderr.decode().strip().splitlines()) == 1


def test_per_kernel_output_skips_memory_lines(parsed):
    # a memory line is no activity: per-kernel rows are the records, as many as parse wrote (its end line says)
    out, _ = parsed("kineto_full.pt.trace.json.gz")
    end = json.loads(out.read_bytes().splitlines()[-1])
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "--csv", str(out)], capture_output=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr.decode()[-400:]
    assert len(p.stdout.decode().splitlines()) == end["records"] + 1  # the header row


def test_memory_run_reads_what_parse_writes():
    from pyprof.record import memory_line

    line = memory_line(7, "cuda:0", "allocator", {"t_ns": [1, 2], "bytes": [512, -512], "allocated": [512, 0],
                                                   "reserved": [2 * MIB, 2 * MIB], "addr": [64, 64], "site": [0, 0]},
                       [{"op": ["add"], "dir": "fprop", "recompute": False, "callsite": "t.py:3", "layer": [],
                         "fwd": None}])
    run = MemoryRun.read(json.loads(line), "x", 1)
    (t,) = timelines([run])
    assert t.peak_index() == 0 and int(t.held.max()) == 512 and t.live_at(0).tolist() == [0]
    assert t.live_at(1).tolist() == []  # freed at the same address
