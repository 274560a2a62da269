"""Unit tests of attribution on small synthetic nsys exports: one rule per test.

Synthetic because the corpus has no capture with pyprof's own markers or with backward passes under
emit_nvtx; the corpus tests check the same code on real exports.
"""
from __future__ import annotations

import io
import json

import pytest

from parse_synth import pyprof_module, pyprof_op

from pyprof.parse import iter_records, parse_file

PID = 100
MAIN, AUTOGRAD = 1, 2
X = {"type": "tensor", "shape": [32, 64], "dtype": "float16", "contig": True, "device": 0}
W = {"type": "tensor", "shape": [128, 64], "dtype": "float16", "contig": True, "device": 0}
B = {"type": "tensor", "shape": [128], "dtype": "float16", "contig": True, "device": 0}


def records(path) -> list[dict]:
    out = io.StringIO()
    parse_file(str(path), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def training_step(b) -> None:
    """A linear layer's forward (pyprof op inside a module inside a layer) and its backward node on the
    autograd thread, with emit_nvtx ranges; two kernels in each direction."""
    b.gpu(0, "NVIDIA H200")
    b.range(PID, MAIN, 0, 1000, "layer:encoder", registered=True, domain=1)
    b.range(PID, MAIN, 10, 900, pyprof_module("encoder.fc", "Linear"), registered=True, domain=1)
    b.range(PID, MAIN, 20, 500, pyprof_op("torch.nn.functional", "linear", [X, W, B], "train.py:41"),
            registered=True, payload=7, domain=1)
    b.range(PID, MAIN, 30, 480, "aten::linear, seq = 5, op_id = 10, sizes = [[32, 64], [128, 64], [128]], "
                                "input_op_ids = [(0, 0), (0, 1), (0, 2)]")
    b.range(PID, MAIN, 40, 470, "aten::addmm, seq = 5, op_id = 12, sizes = [[128], [32, 64], [64, 128], [], []]")
    b.launch(PID, MAIN, 50, 60, corr=1)
    b.kernel(PID, 100, 200, corr=1, name="sm90_gemm_fwd", short="sm90_gemm_fwd")
    b.launch(PID, MAIN, 300, 310, corr=2)
    b.kernel(PID, 400, 450, corr=2, name="bias_add", short="bias_add")
    b.range(PID, AUTOGRAD, 2000, 3000, "AddmmBackward0, seq = 5, op_id = 50")
    b.range(PID, AUTOGRAD, 2010, 2400, "aten::mm, op_id = 51, sizes = [[32, 128], [128, 64]]")
    b.launch(PID, AUTOGRAD, 2020, 2030, corr=3)
    b.kernel(PID, 2100, 2200, corr=3, name="gemm_dgrad", short="gemm_dgrad")
    b.range(PID, AUTOGRAD, 2500, 2900, "aten::mm, op_id = 52, sizes = [[128, 32], [32, 64]]")
    b.launch(PID, AUTOGRAD, 2510, 2520, corr=4)
    b.kernel(PID, 2600, 2700, corr=4, name="gemm_wgrad", short="gemm_wgrad")


def test_forward_kernel_gets_pyprof_op_layer_and_call_site(nsys_builder):
    b = nsys_builder()
    training_step(b)
    k1, k2, _, _ = records(b.close())
    assert k1["kShortName"] == "sm90_gemm_fwd"
    assert k1["op"] == ["linear"] and k1["mod"] == ["torch.nn.functional"]
    assert k1["args"] == [X, W, B]
    assert k1["callsite"] == "train.py:41" and k1["trace"] == ["train.py:41"]
    assert k1["layer"] == ["encoder", "encoder.fc"]
    assert k1["marker"][0]["call"] == 7  # the call id is the NVTX payload, not in the text
    assert k1["dir"] == "fprop" and k1["seqId"] == [5]
    assert k1["ranges"][0] == "layer:encoder" and k1["ranges"][-1].startswith("aten::addmm")
    assert [k1["subSeqId"], k2["subSeqId"]] == [0, 1]
    assert k1["gpu"] == "NVIDIA H200" and k1["gpu_props"]["smCount"] == 132
    assert (k1["api"], k1["api_start_ns"], k1["api_end_ns"], k1["tid"], k1["pid"]) == \
        ("cudaLaunchKernel", 50, 60, MAIN, PID)


def test_backward_kernels_link_to_forward_op(nsys_builder):
    b = nsys_builder()
    training_step(b)
    _, _, dgrad, wgrad = records(b.close())
    for k in (dgrad, wgrad):
        assert k["dir"] == "bprop"
        assert k["op"] == ["mm"] and k["mod"] == ["aten"]
        assert k["seqId"] == [5]
        assert k["fwd"] == {"mod": "torch.nn.functional", "op": "linear", "args": [X, W, B],
                            "callsite": "train.py:41", "layer": ["encoder", "encoder.fc"], "seq": 5}
    # One backward node call, two kernels: the sub-sequence tells dgrad (0) from wgrad (1).
    assert [dgrad["subSeqId"], wgrad["subSeqId"]] == [0, 1]


def test_engine_work_after_the_node_range_links_to_the_forward_op(nsys_builder):
    """PyTorch's engine range around a backward node, as nsys stores it (no seq in its text): a kernel the
    engine launches after the node's own range closed belongs to the node, whose range inside says seq."""
    b = nsys_builder()
    training_step(b)
    b.range(PID, AUTOGRAD, 4000, 5000, "autograd::engine::evaluate_function: AddmmBackward0")
    b.range(PID, AUTOGRAD, 4010, 4400, "AddmmBackward0, seq = 5, op_id = 60")
    b.launch(PID, AUTOGRAD, 4020, 4030, corr=5)
    b.kernel(PID, 4100, 4200, corr=5, name="gemm_dgrad", short="gemm_dgrad")
    b.launch(PID, AUTOGRAD, 4500, 4510, corr=6)  # the node's range has closed: the engine's own work
    b.kernel(PID, 4600, 4700, corr=6, name="reduce_bias_grad", short="reduce_bias_grad")
    # Another engine range whose node is not the one it names: it gets no seq.
    b.range(PID, AUTOGRAD, 6000, 7000, "autograd::engine::evaluate_function: MulBackward0")
    b.range(PID, AUTOGRAD, 6010, 6400, "AddmmBackward0, seq = 5, op_id = 70")
    b.launch(PID, AUTOGRAD, 6500, 6510, corr=7)
    b.kernel(PID, 6600, 6700, corr=7, name="reduce_other", short="reduce_other")
    *_, in_node, engine_only, unrelated = records(b.close())
    assert in_node["seqId"] == [5] and in_node["fwd"]["op"] == "linear"
    assert engine_only["dir"] == "bprop" and engine_only["seqId"] == [5]
    assert engine_only["fwd"] == in_node["fwd"]
    assert unrelated["dir"] == "bprop" and unrelated["seqId"] == [] and unrelated["fwd"] is None


def test_emit_nvtx_alone_names_the_aten_op_with_shapes(nsys_builder):
    b = nsys_builder()
    b.range(PID, MAIN, 0, 100, "aten::conv2d, seq = 9, op_id = 3, sizes = [[8, 3, 32, 32], [16, 3, 3, 3], [], "
                               "[], [], [], []], input_op_ids = [(0, 0)]")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 30, 40, corr=1)
    (k,) = records(b.close())
    assert k["op"] == ["conv2d"] and k["mod"] == ["aten"] and k["seqId"] == [9]
    assert k["args"][:3] == [{"type": "tensor", "shape": [8, 3, 32, 32], "dtype": None},
                             {"type": "tensor", "shape": [16, 3, 3, 3], "dtype": None}, {"type": "unknown"}]


def test_stats_report_op_and_forward_link_shares(nsys_builder):
    b = nsys_builder()
    training_step(b)
    b.kernel(PID, 5000, 5100, corr=99)  # no launch row: still a record, with an empty op
    recs, stats = iter_records(str(b.close()))
    out = list(recs)
    assert len(out) == 5 and out[-1].op == [] and out[-1].api is None
    assert (stats.kernels, stats.kernels_with_op, stats.bprop_kernels, stats.bprop_with_fwd, stats.no_launch) == \
        (5, 4, 2, 2, 1)


def test_correlation_ids_repeat_across_processes(nsys_builder):
    b = nsys_builder()
    b.range(100, 1, 0, 100, "aten::add, seq = 1, op_id = 1")
    b.range(200, 1, 0, 100, "aten::mul, seq = 1, op_id = 1")
    b.launch(100, 1, 10, 20, corr=1)
    b.launch(200, 1, 10, 20, corr=1)
    b.kernel(100, 30, 40, corr=1, device=0)
    b.kernel(200, 31, 41, corr=1, device=1)
    k0, k1 = records(b.close())
    assert (k0["pid"], k0["device"], k0["op"]) == (100, 0, ["add"])
    assert (k1["pid"], k1["device"], k1["op"]) == (200, 1, ["mul"])


def test_graph_launch_and_driver_launch(nsys_builder):
    b = nsys_builder()
    b.range(PID, MAIN, 0, 1000, "layer:decode")
    b.launch(PID, MAIN, 10, 20, corr=5, api="cudaGraphLaunch_v10000")
    for i in range(3):
        b.kernel(PID, 100 + 10 * i, 105 + 10 * i, corr=5)
    b.launch(PID, MAIN, 30, 40, corr=6, api="cuLaunchKernel", event_class=1)
    b.kernel(PID, 500, 510, corr=6, name="triton_kernel", short="triton_kernel")
    recs = records(b.close())
    assert [r["api"] for r in recs] == ["cudaGraphLaunch"] * 3 + ["cuLaunchKernel"]
    assert all(r["layer"] == ["decode"] for r in recs)


def test_range_of_another_domain_that_closed_is_not_an_encloser(nsys_builder):
    b = nsys_builder()
    b.range(PID, MAIN, 0, 100, "A", domain=1)
    b.range(PID, MAIN, 50, 200, "B", domain=2)  # overlaps A without nesting: another domain
    b.range(PID, MAIN, 60, None, "never closed")  # NULL end: never an encloser
    b.launch(PID, MAIN, 60, 70, corr=1)
    b.launch(PID, MAIN, 150, 160, corr=2)
    b.kernel(PID, 300, 310, corr=1)
    b.kernel(PID, 400, 410, corr=2)
    k1, k2 = records(b.close())
    assert k1["ranges"] == ["A", "B"]
    assert k2["ranges"] == ["B"]


def test_a_range_must_enclose_the_whole_launch_call(nsys_builder):
    b = nsys_builder()
    b.range(PID, MAIN, 0, 15, "too short")
    b.range(PID, MAIN, 0, 15, "too short")
    b.range(PID, MAIN, 0, 20, "exact")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 30, 40, corr=1)
    (k,) = records(b.close())
    assert k["ranges"] == ["exact"]


def test_memcpy_is_a_record(nsys_builder):
    b = nsys_builder()
    b.launch(PID, MAIN, 0, 10, corr=1, api="cudaMemcpyAsync_v3020")
    b.memcpy(PID, 20, 30, corr=1, nbytes=4096, kind=1)
    (m,) = records(b.close())
    assert (m["kind"], m["bytes"], m["copy_kind"], m["api"]) == ("memcpy", 4096, "HtoD", "cudaMemcpyAsync")


def test_legacy_pyprof_markers(nsys_builder):
    b = nsys_builder()
    b.range(PID, MAIN, 0, 100, "{'traceMarker': ['train.py:10', 'model.py:20']}")
    b.range(PID, MAIN, 1, 99, "{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [{'name': '', 'type': "
                              "'tensor', 'shape': (32, 3, 224, 224), 'dtype': 'float16'}]}")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 30, 40, corr=1)
    (k,) = records(b.close())
    assert k["op"] == ["conv2d"] and k["mod"] == ["torch.nn.functional"]
    assert k["args"] == [{"type": "tensor", "shape": [32, 3, 224, 224], "dtype": "float16"}]
    assert k["trace"] == ["train.py:10", "model.py:20"] and k["callsite"] == "model.py:20"


def test_export_without_payload_column_or_metadata(nsys_builder):
    b = nsys_builder(payload_column=False, meta_table=None)
    b.range(PID, MAIN, 0, 100, pyprof_op("torch", "matmul", [X, W], "a.py:1"), registered=True)
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 30, 40, corr=1)
    (k,) = records(b.close())
    assert k["op"] == ["matmul"] and "call" not in k["marker"][0]


def test_old_metadata_table_name(nsys_builder):
    b = nsys_builder(meta_table="EXPORT_META_DATA")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 30, 40, corr=1)
    assert len(records(b.close())) == 1


def test_ranges_with_equal_starts_nest_by_their_ends(nsys_builder):
    b = nsys_builder()
    b.range(PID, MAIN, 0, 50, "inner")  # stored first: the reader does not order equal starts
    b.range(PID, MAIN, 0, 100, "outer")
    b.range(PID, MAIN, 0, 70, "middle")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 30, 40, corr=1)
    (k,) = records(b.close())
    assert k["ranges"] == ["outer", "middle", "inner"]


class _Deferred:
    """A builder whose NVTX, runtime and kernel rows are inserted at close, each table's in the given order
    of their calls."""

    def __init__(self, b, order):
        self.b, self.order, self.calls = b, order, {"range": [], "launch": [], "kernel": []}

    def __getattr__(self, name):
        if name in self.calls:
            return lambda *args, **kw: self.calls[name].append((args, kw))
        return getattr(self.b, name)

    def close(self):
        for name, calls in self.calls.items():
            for i in self.order(len(calls)):
                args, kw = calls[i]
                getattr(self.b, name)(*args, **kw)
        return self.b.close()


@pytest.mark.parametrize("check_rows", [2, 1 << 16])
def test_rows_stored_out_of_start_order_are_sorted(nsys_builder, monkeypatch, check_rows):
    """parse reads NVTX, runtime and kernel rows as stored when they are in start order (nsys writes them
    so) and sorts them in SQL otherwise; the stored order is checked in blocks of rows, here of 2 (a block
    boundary between every pair) and of 65536. Unsorted, the reversed export's records would differ."""
    from pyprof.parse import nsys

    monkeypatch.setattr(nsys, "_CHECK_ROWS", check_rows)
    out = {}
    for name, order in (("stored", range), ("reversed", lambda n: reversed(range(n))),
                        ("swapped", lambda n: [*range(n - 2), n - 1, n - 2])):
        b = _Deferred(nsys_builder(f"{name}.sqlite"), order)
        training_step(b)
        path = b.close()
        src = nsys.NsysSource(str(path))
        out[name] = ([src._stored_by_start(t, "1") for t in (nsys.NVTX, nsys.RUNTIME, nsys.KERNEL)], records(path))
        src.close()
    assert [out[k][0] for k in out] == [[True] * 3, [False] * 3, [False] * 3]
    assert out["stored"][1] == out["reversed"][1] == out["swapped"][1]
    assert [k["seqId"] for k in out["stored"][1]] == [[5]] * 4
    assert [k["start_ns"] for k in out["stored"][1]] == [100, 400, 2100, 2600]


def test_forward_ops_remembered_for_backward_links_are_bounded(nsys_builder, monkeypatch):
    """At least the newest FWD_MEMORY_OPS forward ops keep their backward links, at most twice as many:
    the oldest half is dropped at once when the memory is full."""
    from pyprof.parse import correlate

    monkeypatch.setattr(correlate, "FWD_MEMORY_OPS", 2)
    b = nsys_builder()
    corr = 0
    for seq in range(1, 7):  # six forward ops, then their backward nodes, newest first as autograd runs them
        corr += 1
        b.range(PID, MAIN, 100 * seq, 100 * seq + 50, f"aten::mul, seq = {seq}, op_id = {seq}")
        b.launch(PID, MAIN, 100 * seq + 10, 100 * seq + 20, corr=corr)
        b.kernel(PID, 100 * seq + 30, 100 * seq + 40, corr=corr)
    for i, seq in enumerate(range(6, 0, -1)):
        corr += 1
        t = 10_000 + 100 * i
        b.range(PID, AUTOGRAD, t, t + 50, f"MulBackward0, seq = {seq}, op_id = {100 + seq}")
        b.launch(PID, AUTOGRAD, t + 10, t + 20, corr=corr)
        b.kernel(PID, t + 30, t + 40, corr=corr)
    back = [r for r in records(b.close()) if r["dir"] == "bprop"]
    linked = {r["seqId"][0] for r in back if r["fwd"] is not None}
    assert {5, 6} <= linked  # the newest FWD_MEMORY_OPS
    assert linked == {3, 4, 5, 6}  # 1..5 went in, 1 and 2 dropped together at the fifth, then 6


def test_a_table_without_rowids_is_sorted_by_start(tmp_path):
    """The stored-order check reads rowids; a table without them (no nsys version writes one) is sorted."""
    import sqlite3

    from pyprof.parse.nsys import KERNEL, NsysSource

    path = tmp_path / "norowid.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    db.execute(f"CREATE TABLE {KERNEL} (start INTEGER, end INTEGER, correlationId INTEGER, "
               "PRIMARY KEY (correlationId)) WITHOUT ROWID")
    db.execute(f"INSERT INTO {KERNEL} VALUES (5, 6, 1), (1, 2, 2)")
    db.commit()
    db.close()
    src = NsysSource(str(path))
    assert src._order_by(KERNEL) == "ORDER BY start"
    assert [a.start_ns for a in src.activities()] == [1, 5]
    src.close()
