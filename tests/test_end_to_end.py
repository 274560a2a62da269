"""The whole path on the real H200 captures of every example: capture (done on the GPU machine), then the
``pyprof parse`` and ``pyprof prof`` commands a user runs. Expectations come from the exports (sqlite3) and
from torch.utils.flop_counter measured in the same device run (tests/data/flops), not from pyprof."""
from __future__ import annotations

import json
import lzma
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pyprof.record import read_lines


DATA = Path(__file__).resolve().parent / "data"
# Training-step examples captured under pyprof.init(); compiled.py is checked on its own below.
EXAMPLES = ["lenet", "resnet", "transformer", "user_annotation", "custom_function", "custom_module"]


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", *args], capture_output=True, input=stdin)
    assert run.returncode == 0, run.stderr.decode()
    return run


@pytest.fixture(scope="module", params=EXAMPLES + ["compiled"])
def capture(request, tmp_path_factory):
    name = request.param
    db = tmp_path_factory.mktemp(name) / f"{name}.sqlite"
    with lzma.open(DATA / "nsys" / "pyprof" / f"{name}.sqlite.xz") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    records = _run("pyprof.parse", str(db)).stdout
    return name, db, records


def _steps(db: Path) -> list[tuple[int, int]]:
    con = sqlite3.connect(db)
    return con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%' ORDER BY start").fetchall()


def _shaped(args) -> bool:
    return any(a.get("type") == "tensor" or (a.get("type") == "tensorlist" and a.get("items")) for a in args or ())


def test_each_step_attributed_to_ops_with_shapes(capture):
    name, db, out = capture
    records = list(read_lines(out.splitlines()))
    steps = _steps(db)
    assert len(steps) == (1 if name == "resnet" else 2)
    for start, end in steps:
        # A kernel belongs to the step during which it was launched, on any thread (backward runs on
        # the autograd thread, outside the step's range on the main thread).
        kernels = [r for r in records if r["kind"] == "kernel" and r["api_start_ns"] is not None
                   and start <= r["api_start_ns"] <= end]
        total = sum(r["kDuration"] for r in kernels)
        named = sum(r["kDuration"] for r in kernels if r["op"] and (
            _shaped(r["args"]) or (r["fwd"] is not None and _shaped(r["fwd"]["args"]))))
        assert kernels and all(r["op"] for r in kernels)
        if name == "compiled":
            # Inside the compiled graph PyTorch names the kernels (triton_*, aten::addmm) but no shapes.
            assert 0 < named / total < 0.98
        elif name.startswith("custom"):
            # Toy steps of a few elementwise kernels: the autograd engine's AccumulateGrad copies (it owns no
            # forward op and PyTorch's ranges give it no shapes) are a tenth of their GPU time.
            accumulate = sum(r["kDuration"] for r in kernels if any("AccumulateGrad" in x for x in r["ranges"]))
            assert (named + accumulate) / total >= 0.98, (name, named / total)
        else:
            assert named / total >= 0.98, (name, named / total)


def test_flops_per_step_match_flop_counter(capture):
    name, db, out = capture
    run = _run("pyprof.prof", "-v", "--group-by", "op", "-", stdin=out)
    reported = re.search(rb"comparable with torch.utils.flop_counter\) (\d+)", run.stderr)
    assert reported, run.stderr.decode()
    per_step = int(reported.group(1)) / len(_steps(db))
    expected = json.loads((DATA / "flops" / f"{name}.json").read_text())["flops_per_step"]
    if name == "compiled":
        assert per_step == 0 and expected > 0  # the compiled graph's GEMMs carry no shapes (docs/capture.md)
    else:
        assert abs(per_step - expected) <= 0.03 * expected, (name, per_step, expected)


def test_user_source_lines_in_the_trace_column(capture):
    name, db, out = capture
    run = _run("pyprof.prof", "--csv", "-c", "dir,op,trace", "-", stdin=out)
    lines = run.stdout.decode().splitlines()
    source = (Path(__file__).resolve().parents[1] / "examples" / f"{name}.py").read_text().splitlines()
    sites = {int(m) for m in re.findall(rf"examples/{name}\.py:(\d+)", "\n".join(lines))}
    assert sites, f"no line of examples/{name}.py in the trace column"
    for line_no in sites:  # every line named is a line of the script that calls into torch
        assert source[line_no - 1].strip() and not source[line_no - 1].strip().startswith("#")
