"""pyprof.parse on the real H200 captures of this project's examples (tests/data/README.md).

Expected values come from the exports themselves, read here with sqlite3 / json, not from the parser.
"""
from __future__ import annotations

import gzip
import json
import lzma
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pyprof.record import read_lines


DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NSYS = sorted((DATA / "nsys").glob("*/*.sqlite.xz"))
KINETO = sorted((DATA / "kineto").glob("*.pt.trace.json.gz"))


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name.split('.')[0]}"


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Decompressed exports and their parsed records, by fixture id."""
    out = {}
    tmp = tmp_path_factory.mktemp("h200")
    for xz in NSYS:
        db = tmp / f"{xz.parent.name}_{xz.name[:-3]}"
        with lzma.open(xz) as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
        out[_id(xz)] = (db, _parse(db))
    return out


def _parse(path: Path) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "pyprof.parse", "--raw-markers", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return list(read_lines(run.stdout.splitlines()))


def test_fixtures_present():
    assert len(NSYS) == 14 and len(KINETO) == 8  # a missing fixture fails, it does not skip


@pytest.mark.parametrize("xz", NSYS, ids=_id)
def test_one_record_per_gpu_activity_with_sql_durations(exports, xz):
    db, records = exports[_id(xz)]
    con = sqlite3.connect(db)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    expected = {}
    for kind, table in (("kernel", "CUPTI_ACTIVITY_KIND_KERNEL"), ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
                        ("memset", "CUPTI_ACTIVITY_KIND_MEMSET")):
        if table in tables:
            expected[kind] = con.execute(f"SELECT COUNT(*), SUM(end - start) FROM {table}").fetchone()
    for kind, (count, total_ns) in expected.items():
        mine = [r for r in records if r["kind"] == kind]
        assert len(mine) == count
        assert sum(r["kDuration"] for r in mine) == total_ns
    assert len(records) == sum(c for c, _ in expected.values())
    starts = [r["start_ns"] for r in records]
    assert starts == sorted(starts)


@pytest.mark.parametrize("xz", NSYS, ids=_id)
def test_every_kernel_has_an_op_and_backward_its_forward(exports, xz):
    _, records = exports[_id(xz)]
    kernels = [r for r in records if r["kind"] == "kernel"]
    assert all(r["op"] for r in kernels)
    numbered_backward = [r for r in kernels if r["dir"] == "bprop" and r["seqId"]]
    assert all(r["fwd"] is not None for r in numbered_backward)
    if "emit_nvtx" not in str(xz) and "window" not in str(xz):
        # Under pyprof.init() the forward kernels name the torch call, with the user's line; inside a
        # torch.compile'd graph there are no torch calls, only the graph's aten and triton ranges.
        forward = [r for r in kernels if r["dir"] == "fprop"]
        compiled = [r for r in forward if any(x.startswith("Torch-Compiled Region") for x in r["ranges"])]
        assert forward and all(r["callsite"] for r in forward if r not in compiled)
        assert all(r["op"][0] == "addmm" or r["op"][0].endswith(" (kernel name)") for r in compiled)
        assert ("compiled" in str(xz)) == bool(compiled)


def test_lenet_conv_forward_and_backward(exports):
    _, records = exports["pyprof/lenet"]
    lines = open(EXAMPLES / "lenet.py").read().splitlines()
    conv1 = next(i for i, t in enumerate(lines, 1) if "self.conv1(x)" in t)
    conv2 = next(i for i, t in enumerate(lines, 1) if "self.conv2(x)" in t)
    fwd = [r for r in records if r["dir"] == "fprop" and r["op"][:1] == ["conv2d"]]
    assert {r["callsite"].rsplit("/", 1)[1] for r in fwd} == {f"lenet.py:{conv1}", f"lenet.py:{conv2}"}
    first = [r for r in fwd if r["callsite"].endswith(f":{conv1}")]
    assert first and all(r["args"][0]["shape"] == [64, 1, 28, 28] and r["layer"][-1] == "conv1" for r in first)
    back = [r for r in records if r["dir"] == "bprop" and "ConvolutionBackward0" in " ".join(r["seqMarker"])]
    assert back and all(r["fwd"]["op"] == "conv2d" and r["fwd"]["callsite"] for r in back)
    # conv1's backward needs no input gradient: only conv2's has both dgrad and wgrad kernels.
    assert {r["fwd"]["args"][0]["shape"][1] for r in back} == {1, 6}


def test_emit_nvtx_alone_names_aten_ops(exports):
    _, records = exports["emit_nvtx/resnet"]
    kernels = [r for r in records if r["kind"] == "kernel"]
    assert all(r["op"] for r in kernels)
    fwd_ops = {r["op"][0] for r in kernels if r["dir"] == "fprop"}
    assert {"conv2d", "batch_norm", "relu_"} <= fwd_ops | {o for r in kernels for o in r["op"]}
    assert {r["fwd"]["op"] for r in kernels if r["dir"] == "bprop" and r["fwd"]} >= {"conv2d", "batch_norm"}


def test_profile_window_holds_only_the_window(exports):
    db, records = exports["pyprof/profile_window"]
    steps = {int(r["kShortName"] != "") for r in records}
    assert steps == {1} and len([r for r in records if r["kind"] == "kernel"]) == 51
    # Three iterations: every forward Linear kernel of the window is there three times.
    addmm = [r for r in records if r["op"][:1] == ["linear"] and r["dir"] == "fprop"]
    assert len(addmm) % 3 == 0 and addmm


def test_user_layers_and_hand_written_ranges(exports):
    _, records = exports["pyprof/user_annotation"]
    layers = {tuple(r["layer"]) for r in records if r["kind"] == "kernel" and r["dir"] == "fprop"}
    assert any(l[:2] == ("Sequential", "0") and "Bottleneck_0" in l and "Conv1" in l for l in layers)
    assert any("Conv3" in l for l in layers)  # torch.cuda.nvtx.range_push("layer:Conv3") by hand
    assert any("Head" in l for l in layers)  # the decorator form


@pytest.mark.parametrize("trace", KINETO, ids=lambda p: p.name.split(".")[0])
def test_kineto_trace_records_and_ops(trace):
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    records = _parse(trace)
    assert len(records) == len(gpu)
    kernels = [r for r in records if r["kind"] == "kernel"]
    assert len(kernels) == sum(1 for e in gpu if e["cat"] == "kernel")
    with_op = [r for r in kernels if r["op"]]
    assert len(with_op) / len(kernels) >= 0.99
    shaped = [r for r in with_op if r["args"] or (r["fwd"] and r["fwd"]["args"])]
    assert len(shaped) / len(with_op) >= 0.95
