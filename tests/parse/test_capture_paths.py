"""Every capture path a user may take without pyprof.init() (issue 16), on real captures of
examples/transformer.py made on the H200 (tests/data/paths, tests/data/capture_paths.sh): Nsight Systems' own
--pytorch modes, and a torch.profiler trace with stacks and modules, also through Lightning's profiler."""
from __future__ import annotations

import gzip
import io
import json
import lzma
import pathlib
import sqlite3

import pytest

from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build

DATA = pathlib.Path(__file__).parents[1] / "data" / "paths"
EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "transformer.py"
# One step's linear FLOPs, two steps captured: 4 blocks of qkv (1024 -> 3072), proj (1024 -> 1024), fc1 (1024 ->
# 4096) and fc2 (4096 -> 1024) on 8 x 511 = 4,088 tokens, and the head (1024 -> 32,000): 2 x M x K x N each.
TOKENS = 8 * 511
LINEAR_FLOPS = 2 * (4 * 2 * TOKENS * 1024 * (3072 + 1024 + 4096 + 4096) + 2 * TOKENS * 1024 * 32000)


def _records(name: str) -> list[dict]:
    out = io.StringIO()
    parse_file(str(DATA / name), out)
    return [json.loads(x) for x in out.getvalue().splitlines() if '"kind"' in x]


def _sqlite_count(name: str, tmp_path) -> int:
    db = tmp_path / "x.sqlite"
    db.write_bytes(lzma.decompress((DATA / name).read_bytes()))
    con = sqlite3.connect(db)
    n = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
            ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
            if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone())
    con.close()
    return n


def _table(recs, name):
    (t,) = build(aggregate([("x", recs)]), [name])
    return t, {c: i for i, c in enumerate(t.columns)}


@pytest.mark.parametrize("name, shapes", [("nsys_pytorch_autograd-nvtx.sqlite.xz", False),
                                          ("nsys_pytorch_autograd-shapes-nvtx.sqlite.xz", True),
                                          ("nsys_pytorch_autograd-shapes-nvtx+functions-trace.sqlite.xz", True)])
def test_nsys_pytorch_autograd_modes_give_full_records(name, shapes, tmp_path):
    recs = _records(name)
    assert len(recs) == _sqlite_count(name, tmp_path)  # every activity, against a sqlite3 recount
    kernels = [d for d in recs if d["kind"] == "kernel"]
    assert all(d["op"] for d in kernels)  # every kernel attributed to an op
    bwd = [d for d in kernels if d["dir"] == "bprop"]
    assert bwd and all(d.get("fwd") for d in bwd)  # every backward kernel linked to its forward op
    t, c = _table(recs, "operators")
    linear = next(r for r in t.rows if r[c["op"]] == "linear")
    # with shapes the linear FLOPs are the arithmetic above; without (emit_nvtx records names only) unknown
    assert linear[c["flops"]] == (LINEAR_FLOPS if shapes else None)


def test_nsys_functions_trace_alone_names_forward_ops_and_module_classes():
    recs = _records("nsys_pytorch_functions-trace.sqlite.xz")
    ops = {}
    for d in recs:
        if d["kind"] == "kernel" and d["op"]:
            ops[d["op"][0]] = ops.get(d["op"][0], 0) + 1
    # 17 linear calls a step (4 blocks x 4, and the head), one kernel each, two steps
    assert ops["linear"] == 2 * 17
    assert {"layer_norm", "scaled_dot_product_attention", "cross_entropy", "embedding"} <= set(ops)
    layers = {tuple(d["layer"]) for d in recs if d["layer"]}
    assert ("Linear",) in layers and ("LayerNorm",) in layers  # module classes: the trace has no instance names


def _frames(name: str) -> list[dict]:
    return [e for e in json.load(gzip.open(DATA / name))["traceEvents"] if e.get("cat") == "python_function"]


def test_torch_profiler_stacks_give_lines_and_modules_give_layers():
    name = "kineto_full.pt.trace.json.gz"
    recs = _records(name)
    kernels = [d for d in recs if d["kind"] == "kernel"]
    sited = [d for d in kernels if d.get("callsite") or (d.get("fwd") or {}).get("callsite")]
    assert len(sited) == len(kernels)  # every kernel has its line (backward ones through their forward op)
    # PyTorch's Python tracer names each frame by its function's first line: the lines are the defs of
    # Block.forward, Encoder.forward and step() in the example
    source = EXAMPLE.read_text().splitlines()
    t, c = _table(recs, "lines")
    lines = {r[c["line"]] for r in t.rows}
    assert {source[int(x.rsplit(":", 1)[1]) - 1].strip() for x in lines} == \
        {"def forward(self, x):", "def forward(self, tokens):", "def step():"}
    blocks = {e["name"] for e in _frames(name) if e["name"].startswith("nn.Module: Block_")}
    t, c = _table(recs, "layers")
    assert {r[c["layer"]] for r in t.rows if r[c["layer"]].startswith("Block_")} == \
        {b.split(": ")[1] for b in blocks} and len(blocks) == 4


def test_lightning_trace_keeps_forward_work_out_of_the_optimizer():
    # Lightning runs the whole training step inside optimizer.step(closure): only the optimizer's own (foreach)
    # kernels are optimizer time, the model's forward kernels forward time
    recs = _records("lightning.pt.trace.json.gz")
    t, c = _table(recs, "lines")
    foreach_ms = sum(d["kDuration"] for d in recs if d["op"] and d["op"][0].startswith("_foreach_")) / 1e6
    assert foreach_ms > 1.0
    assert sum(r[c["opt_ms"]] for r in t.rows) == pytest.approx(foreach_ms, abs=1e-3)
    block = next(r for r in t.rows if r[c["line"]] == "transformer.py:26")
    assert block[c["fwd_ms"]] > 1.0 and block[c["opt_ms"]] == 0


@pytest.mark.parametrize("name", ["run_nsys.sqlite.xz", "run_torch.pt.trace.json.gz"])
def test_pyprof_run_captures_the_asked_steps(name, tmp_path):
    # `pyprof run -- python3 examples/train_plain.py` on the H200, each backend (tests/data/README.md): three
    # measured steps after two of warm-up, each one training step of the transformer, whose kernels a step the
    # committed pyprof.init() capture of the same model counts with sqlite3 (its two steps' kernels / 2)
    db = tmp_path / "t.sqlite"
    db.write_bytes(lzma.decompress((DATA.parent / "nsys" / "pyprof" / "transformer.sqlite.xz").read_bytes()))
    con = sqlite3.connect(db)
    per_step = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] // 2
    con.close()
    t, c = _table(_records(name), "overview")
    steps = [r for r in t.rows if r[c["step"]].startswith("ProfilerStep#")]
    assert len(steps) == 3
    # the last two steps are whole (the PyTorch profiler's first active step also holds what ran before it)
    assert [r[c["kernels"]] for r in steps[1:]] == [per_step, per_step]
