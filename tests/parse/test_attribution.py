"""Unit tests of attribution on small synthetic nsys exports: one rule per test.

Synthetic because the corpus has no capture with pyprof's own markers or with backward passes under
emit_nvtx; the corpus tests check the same code on real exports.
"""
from __future__ import annotations

import io

import pytest

from parse_synth import pyprof_module, pyprof_op

from pyprof.parse import parse_records, parse_file
from pyprof.record import read_lines


PID = 100
MAIN, AUTOGRAD = 1, 2
X = {"type": "tensor", "shape": [32, 64], "dtype": "float16", "contig": True, "device": 0}
W = {"type": "tensor", "shape": [128, 64], "dtype": "float16", "contig": True, "device": 0}
B = {"type": "tensor", "shape": [128], "dtype": "float16", "contig": True, "device": 0}


def records(path) -> list[dict]:
    out = io.StringIO()
    parse_file(str(path), out)
    return list(read_lines(out.getvalue().splitlines()))


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
    # emit_nvtx records no dtypes: schema 3 leaves the key out rather than writing null
    assert k["args"][:3] == [{"type": "tensor", "shape": [8, 3, 32, 32]},
                             {"type": "tensor", "shape": [16, 3, 3, 3]}, {"type": "unknown"}]


def test_stats_report_op_and_forward_link_shares(nsys_builder):
    b = nsys_builder()
    training_step(b)
    b.kernel(PID, 5000, 5100, corr=99)  # no launch row: still a record, with an empty op
    recs, stats = parse_records(str(b.close()))
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
    from pyprof.parse.readers import nsys

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
    from pyprof.parse.attribute import correlate

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

    from pyprof.parse.readers.nsys import KERNEL, NsysSource

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


def test_cpp_custom_node_is_backward_and_links_without_recursion(nsys_builder):
    """A C++ custom autograd Function's node is named ``torch::autograd::CppNode<...>`` (no Backward suffix) and
    carries its forward op's sequence number inside the engine's range: it is backward work, linked to the
    forward op; before, it replaced the forward op under that number and the link followed itself forever."""
    b = nsys_builder()
    b.range(PID, MAIN, 0, 500, "fbgemm::split_lookup, seq = 9, op_id = 1, sizes = [[64, 128]]")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 100, 200, corr=1, name="lookup_fwd", short="lookup_fwd")
    b.range(PID, AUTOGRAD, 1000, 2000, "autograd::engine::evaluate_function: torch::autograd::CppNode<SplitLookup>")
    b.range(PID, AUTOGRAD, 1010, 1900, "torch::autograd::CppNode<SplitLookup>, seq = 9, op_id = 7")
    b.launch(PID, AUTOGRAD, 1020, 1030, corr=2)
    b.kernel(PID, 1100, 1200, corr=2, name="lookup_bwd", short="lookup_bwd")
    fwd, bwd = records(b.close())
    assert fwd["dir"] == "fprop" and fwd["op"] == ["split_lookup"]
    assert bwd["dir"] == "bprop" and bwd["fwd"]["op"] == "split_lookup" and bwd["fwd"]["seq"] == 9


def test_a_range_whose_number_is_its_own_enclosing_nodes_does_not_recurse(nsys_builder):
    """A node under a name no rule knows, right inside the engine's range and with the engine's number: never
    taken as the forward op of that number, so resolving the link cannot loop (there is no forward op here)."""
    b = nsys_builder()
    b.range(PID, AUTOGRAD, 1000, 2000, "autograd::engine::evaluate_function: SomeNode")
    b.range(PID, AUTOGRAD, 1010, 1900, "SomeNode, seq = 4, op_id = 7")
    b.range(PID, AUTOGRAD, 1020, 1800, "aten::mul, op_id = 8, sizes = [[4], [4]]")
    b.launch(PID, AUTOGRAD, 1030, 1040, corr=1)
    b.kernel(PID, 1100, 1200, corr=1)
    (rec,) = records(b.close())
    assert rec["op"] == ["mul"] and rec["fwd"] is None


def test_recomputed_forward_ops_are_their_own_ops(nsys_builder):
    """Activation checkpointing: inside a backward node, numbered forward ops run again (grad enabled). Their
    kernels are forward kernels of those ops, marked recompute, and the later backward node of the recomputed
    op links to it (not to the node around the recompute)."""
    b = nsys_builder()
    b.range(PID, MAIN, 0, 500, "aten::relu, seq = 3, op_id = 1, sizes = [[8, 16]]")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 100, 150, corr=1, name="relu_fwd", short="relu_fwd")
    b.range(PID, AUTOGRAD, 1000, 3000, "autograd::engine::evaluate_function: ReluBackward0")
    b.range(PID, AUTOGRAD, 1010, 2900, "ReluBackward0, seq = 3, op_id = 20")
    b.range(PID, AUTOGRAD, 1020, 1500, "aten::conv2d, seq = 11, op_id = 21, sizes = [[8, 4, 6, 6], [16, 4, 3, 3]]")
    b.launch(PID, AUTOGRAD, 1030, 1040, corr=2)
    b.kernel(PID, 1100, 1200, corr=2, name="conv_fwd", short="conv_fwd")
    b.range(PID, AUTOGRAD, 1600, 1700, "aten::threshold_backward, op_id = 22, sizes = [[8, 16], [8, 16], []]")
    b.launch(PID, AUTOGRAD, 1610, 1620, corr=3)
    b.kernel(PID, 1650, 1690, corr=3, name="relu_bwd", short="relu_bwd")
    b.range(PID, AUTOGRAD, 4000, 5000, "autograd::engine::evaluate_function: ConvolutionBackward0")
    b.range(PID, AUTOGRAD, 4010, 4900, "ConvolutionBackward0, seq = 11, op_id = 30")
    b.launch(PID, AUTOGRAD, 4020, 4030, corr=4)
    b.kernel(PID, 4100, 4200, corr=4, name="conv_dgrad", short="conv_dgrad")
    _, recomputed, relu_bwd, conv_bwd = records(b.close())
    assert recomputed["op"] == ["conv2d"] and recomputed["dir"] == "fprop" and recomputed["recompute"] is True
    assert recomputed["seqId"] == [11] and recomputed["fwd"] is None
    assert recomputed["args"][0]["shape"] == [8, 4, 6, 6]
    assert relu_bwd["dir"] == "bprop" and relu_bwd["recompute"] is False and relu_bwd["fwd"]["op"] == "relu"
    assert conv_bwd["dir"] == "bprop" and conv_bwd["fwd"]["op"] == "conv2d" and conv_bwd["fwd"]["seq"] == 11


def test_ops_of_the_engine_thread_outside_nodes_are_backward(nsys_builder):
    """The engine's thread sums the gradients of a tensor used twice with a plain aten::add between nodes:
    backward work (a thread whose first numbered range is a node is the engine's)."""
    b = nsys_builder()
    b.range(PID, MAIN, 0, 500, "aten::mul, seq = 3, op_id = 1, sizes = [[8], [8]]")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 100, 150, corr=1)
    b.range(PID, AUTOGRAD, 1000, 2000, "MulBackward0, seq = 3, op_id = 20")
    b.range(PID, AUTOGRAD, 3000, 3100, "aten::add, op_id = 21, sizes = [[8], [8], []]")
    b.launch(PID, AUTOGRAD, 3010, 3020, corr=2)
    b.kernel(PID, 3050, 3090, corr=2)
    b.launch(PID, AUTOGRAD, 3200, 3210, corr=3)  # outside every range
    b.kernel(PID, 3250, 3290, corr=3)
    fwd, add, bare = records(b.close())
    assert fwd["dir"] == "fprop"
    assert add["dir"] == "bprop" and add["op"] == ["add"] and add["fwd"] is None
    assert bare["dir"] == "bprop" and bare["op"] == []


def test_record_function_ranges_hold_ops_and_are_not_ones(nsys_builder):
    """emit_nvtx writes a record_function range (Optimizer.step#SGD.step) like an op, with an op_id and no
    namespace or sequence number: the aten op inside names the kernel, and each aten op is its own call."""
    b = nsys_builder()
    b.range(PID, MAIN, 0, 1000, "Optimizer.step#SGD.step, op_id = 1")
    b.range(PID, MAIN, 10, 400, "aten::_foreach_mul_, op_id = 2, sizes = [[], []]")
    b.launch(PID, MAIN, 20, 30, corr=1)
    b.kernel(PID, 100, 150, corr=1)
    b.range(PID, MAIN, 500, 900, "aten::_foreach_add_, op_id = 3, sizes = [[], []]")
    b.launch(PID, MAIN, 510, 520, corr=2)
    b.kernel(PID, 600, 650, corr=2)
    mul, add = records(b.close())
    assert mul["op"] == ["_foreach_mul_"] and add["op"] == ["_foreach_add_"]
    assert mul["subSeqId"] == 0 and add["subSeqId"] == 0
    assert mul["ranges"][0] == "Optimizer.step#SGD.step"


def test_output_shape_of_a_convolution_comes_from_the_op_that_consumes_it(nsys_builder):
    """emit_nvtx records a convolution's tensor sizes but not its stride: the next op's input_op_ids name
    (conv's op_id, output 0) with that input's size, which is the convolution's output shape."""
    b = nsys_builder()
    b.range(PID, MAIN, 0, 500, "aten::conv2d, seq = 1, op_id = 5, sizes = [[8, 3, 32, 32], [16, 3, 3, 3], [], [], "
                               "[], [], []], input_op_ids = [(0,-1), (0,-1), (0,-1), (0,-1), (0,-1), (0,-1), (0,-1)]")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 100, 200, corr=1, name="conv_fwd", short="conv_fwd")
    b.range(PID, MAIN, 600, 900, "aten::relu_, seq = 2, op_id = 6, sizes = [[8, 16, 16, 16]], "
                                 "input_op_ids = [(5,0)]")
    b.launch(PID, MAIN, 610, 620, corr=2)
    b.kernel(PID, 700, 800, corr=2, name="relu", short="relu")
    conv, relu = records(b.close())
    assert conv["outputs"] == [[8, 16, 16, 16]]
    assert relu["outputs"] == []  # not an op whose output its inputs leave open


def test_output_shape_not_named_in_time_is_left_unknown(nsys_builder):
    """A consumer later than correlate.OUTPUT_WAIT_NS (20 ms of CPU time) after the launch is not waited for."""
    b = nsys_builder()
    b.range(PID, MAIN, 0, 500, "aten::max_pool2d, seq = 1, op_id = 5, sizes = [[8, 3, 32, 32], [], [], [], [], []]")
    b.launch(PID, MAIN, 10, 20, corr=1)
    b.kernel(PID, 100, 200, corr=1)
    late = 10 + 20_000_000 + 1_000
    b.range(PID, MAIN, late, late + 500, "aten::relu_, seq = 2, op_id = 6, sizes = [[8, 3, 16, 16]], "
                                         "input_op_ids = [(5,0)]")
    b.launch(PID, MAIN, late + 10, late + 20, corr=2)
    b.kernel(PID, late + 100, late + 200, corr=2)
    pool, _ = records(b.close())
    assert pool["outputs"] == []
