"""The committed H200 captures (tests/data), through `python -m pyprof.parse` and prof's model: per step, the
GEMM/convolution/attention FLOPs equal torch.utils.flop_counter's (tests/data/flops, measured on the GPU
machine in the same run as the capture); every GEMM/convolution kernel carries FLOPs or names the kernel of
its call that does; Tensor Core column right for matrix and element-wise kernels. The number of steps in a
capture is counted from the capture itself, independently of parse."""
from __future__ import annotations

import gzip
import json
import lzma
import os
import sqlite3
import subprocess
import sys

import pytest

from pyprof.record import read_lines
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.model.registry import COUNTED_FAMILIES
from pyprof.prof.model.tensorcores import tc_used

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")


def _kineto_steps(path: str) -> int:
    events = json.load(gzip.open(path))["traceEvents"]
    return sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#"))


def _nsys_steps(path: str) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT count(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON n.textId = s.id "
                           "WHERE coalesce(n.text, s.value) LIKE 'ProfilerStep#%'").fetchone()[0]
    finally:
        con.close()


def _records(path: str, tmp_path) -> list[dict]:
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", path], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return list(read_lines(p.stdout.splitlines()))


CASES = [("kineto", "resnet"), ("kineto", "transformer"), ("kineto", "lenet"), ("kineto", "user_annotation"),
         # The PyTorch profiler records the shapes of the aten ops inside a torch.compile'd graph: its GEMMs count.
         ("kineto", "compiled"), ("nsys/pyprof", "resnet"),
         ("nsys/pyprof", "transformer"), ("nsys/pyprof", "lenet"), ("nsys/pyprof", "user_annotation")]


@pytest.mark.parametrize("fmt,example", CASES)
def test_capture_matches_flop_counter(fmt, example, tmp_path):
    if fmt == "kineto":
        path = os.path.join(DATA, "kineto", f"{example}.pt.trace.json.gz")
        steps = _kineto_steps(path)
    else:
        path = str(tmp_path / f"{example}.sqlite")
        with lzma.open(os.path.join(DATA, fmt, f"{example}.sqlite.xz")) as src, open(path, "wb") as dst:
            dst.write(src.read())
        steps = _nsys_steps(path)
    expected = json.load(open(os.path.join(DATA, "flops", f"{example}.json")))["flops_per_step"] * steps
    assert steps >= 1
    m = Modeller()
    total = 0
    for r in _records(path, tmp_path):
        res = m.model(r)
        if res.flops and res.family in COUNTED_FAMILIES:
            total += res.flops
        if r.get("kind", "kernel") != "kernel":
            continue
        name = r.get("kLongName") or r["kShortName"]
        if tc_used(name) is True and res.family in COUNTED_FAMILIES:
            # a matrix kernel: its FLOPs, or the note names the kernel of its call that carries them
            assert res.flops or (res.reason or "").startswith("counted on sub"), (name, res)
            assert res.tc is True, (name, res)
        if "elementwise_kernel" in name:
            assert res.tc is None, (name, res)
    assert abs(total - expected) <= 0.03 * expected, (total, expected)
    assert total == expected  # in fact exact on these captures


def test_emit_nvtx_alone_counts_convolutions_from_shapes_it_records_and_never_guesses_a_stride(tmp_path):
    """emit_nvtx records tensor sizes but no stride. The backward convolutions are exact because grad_output's
    shape is the output's; the forward ones because parse finds the output's shape in the op that consumes it
    (the record's outputs). Without that shape a forward convolution is na, never taken as stride 1 (a
    stride-2 convolution would be 4x off)."""
    path = str(tmp_path / "resnet.sqlite")
    with lzma.open(os.path.join(DATA, "nsys", "emit_nvtx", "resnet.sqlite.xz")) as src, open(path, "wb") as dst:
        dst.write(src.read())
    flop_counter = json.load(open(os.path.join(DATA, "flops", "resnet.json")))["by_op"]
    m = Modeller()
    counted = {"fprop": 0, "bprop": 0}
    forward = []
    for r in _records(path, tmp_path):
        res = m.model(r)
        if r.get("kind") == "kernel" and res.family == "conv" and res.flops:
            counted[r["dir"]] += res.flops
        if r.get("kind") == "kernel" and r["dir"] == "fprop" and r["op"][:1] == ["conv2d"]:
            forward.append(r)
    # FlopCounterMode's counts of the same step (tests/data/flops/resnet.json, one step captured).
    assert counted["fprop"] == flop_counter["aten.convolution"]
    assert counted["bprop"] == flop_counter["aten.convolution_backward"]
    blind = Modeller()
    for r in forward:
        res = blind.model({**r, "outputs": []})
        if res.flops is None and not (res.reason or "").startswith(("counted on sub", "helper kernel")):
            assert "stride not recorded" in res.reason
            break
    else:
        raise AssertionError("no forward convolution without its output shape came out na")
