"""The trace export: every GPU activity present with its record's times, launches on CPU rows, flows paired."""
from __future__ import annotations

import io
import json
import pathlib

import pytest

from pyprof.parse import parse_file
from pyprof.report.perfetto import GPU_PID_BASE, events, write_trace
from pyprof.record import read_lines

DATA = pathlib.Path(__file__).parents[1] / "data" / "nsys" / "pyprof"


@pytest.fixture(scope="module")
def resnet() -> list[dict]:
    buf = io.StringIO()
    parse_file(str(DATA / "resnet.sqlite.xz"), buf)
    return list(read_lines(buf.getvalue().splitlines()))  # the records, every key present


def _trace(resnet, **kw) -> dict:
    out = io.StringIO()
    write_trace(iter(resnet), out, **kw)  # an iterator: the writer must not need a list
    return json.loads(out.getvalue())


def test_every_activity_with_its_times(resnet):
    records = resnet
    evs = _trace(resnet)["traceEvents"]
    gpu = [e for e in evs if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE]
    assert len(gpu) == len(resnet) == 784
    for e, d in zip(gpu, records):  # written in record order
        assert e["name"] == d["kShortName"]
        assert abs(e["ts"] * 1000 - d["start_ns"]) < 0.5  # us floats keep the nanoseconds
        assert abs(e["dur"] * 1000 - d["kDuration"]) < 0.5


def test_launches_on_cpu_rows_and_flows_pair_up(resnet):
    records = resnet
    evs = _trace(resnet)["traceEvents"]
    launches = [e for e in evs if e["ph"] == "X" and e["pid"] < GPU_PID_BASE and e["cat"] == "cuda_api"]
    assert len(launches) == sum(1 for d in records if d["api_start_ns"] is not None) == 784
    assert {(e["pid"], e["tid"]) for e in launches} == {(d["pid"], d["tid"]) for d in records}
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    assert len(starts) == len(ends) == 784 and starts.keys() == ends.keys()
    kernel_at = {(e["pid"], e["tid"], e["ts"]) for e in evs if e["ph"] == "X"}
    for i, s in starts.items():
        f = ends[i]
        assert f["bp"] == "e" and f["cat"] == s["cat"] and f["name"] == s["name"]
        assert (s["pid"], s["tid"], s["ts"]) in kernel_at  # starts at its launch slice
        assert (f["pid"], f["tid"], f["ts"]) in kernel_at  # ends at its kernel's start
        assert f["ts"] >= s["ts"]  # a kernel never starts before its launch call


def test_rows_are_named(resnet):
    evs = _trace(resnet)["traceEvents"]
    names = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert {"GPU 0 (NVIDIA H200)", "stream 7", "CPU process 1105", "thread 1105", "thread 1134"} <= names


def test_args_carry_op_and_model(resnet):
    evs = _trace(resnet)["traceEvents"]
    first = next(e for e in evs if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE)
    a = first["args"]
    # records[0]: the fp32 -> fp16 copy of conv1's input under AMP, torch.nn.functional.conv2d's first kernel
    assert a["op"] == "torch.nn.functional.conv2d" and a["dir"] == "fprop" and a["layer"] == "ResNet.conv1"
    assert a["callsite"].endswith("torchvision/models/resnet.py:268")
    assert a["shapes"].startswith("float32[64, 3, 224, 224], float32[64, 3, 7, 7]")
    assert a["correlation id"] == 3104 and a["kernel"].startswith("void at::native::vectorized_elementwise_kernel")
    conv = [e["args"] for e in evs if e["ph"] == "X" and e.get("args", {}).get("flops")]
    assert conv and all(isinstance(x["flops"], int) for x in conv)


def test_cap_keeps_valid_json_and_says_so(resnet):
    t = _trace(resnet, max_events=10)
    assert sum(1 for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE) == 10
    slices = sum(1 for e in t["traceEvents"] if e.get("cat") == "range")
    measured = sum(1 for e in t["traceEvents"] if e.get("cat") == "range" and "push to" in e["args"]["times"])
    assert t["otherData"] == {"producer": "pyprof report --trace", "activities": 10, "activities_in_input": 784,
                              "cpu_range_slices": slices, "cpu_range_slices_measured": measured, "truncated": True,
                              "ts_origin_ns": 0}  # an nsys export's own clock: no origin needed
    assert slices > 0


def test_graph_launch_drawn_once_and_missing_launch_tolerated():
    base = {"kind": "kernel", "kShortName": "k", "kDuration": 10, "pid": 1, "tid": 2, "device": 0, "stream": 3,
            "api": "cudaGraphLaunch", "api_start_ns": 100, "api_end_ns": 200, "correlation_id": 9}
    recs = [dict(base, start_ns=1000, end_ns=1010), dict(base, start_ns=1020, end_ns=1030),
            dict(base, start_ns=1040, end_ns=1050, api=None, api_start_ns=None, api_end_ns=None, tid=None)]
    evs = list(events(recs))
    assert sum(1 for e in evs if e["ph"] == "X" and e["pid"] == 1) == 1  # one graph launch call
    assert sum(1 for e in evs if e["ph"] == "f") == 2  # two of its kernels, an arrow each
    assert sum(1 for e in evs if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE) == 3


def test_a_field_of_a_wrong_type_names_its_input_and_line():
    # Records that skipped the reader's checks (a caller's dicts): the message names the input they came from.
    from pyprof.common import InputError
    from pyprof.report.perfetto import write_source_trace

    good = {"kind": "kernel", "kShortName": "k", "kDuration": 10, "start_ns": 0, "gpu": "NVIDIA H100 80GB HBM3"}
    sources = [("rank0.dict", [(1, good)]), ("rank1.dict", [(1, good), (2, dict(good, kDuration="10"))])]
    with pytest.raises(InputError) as e:
        write_source_trace(sources, io.StringIO())
    assert e.value.path == "rank1.dict" and e.value.problem.startswith("line 2: ")


def test_names_are_whole_and_strict_json():
    # The trace is for tools: names whole (a page cuts them), escaped by the encoder; a legacy line's lone
    # surrogate too, which orjson refuses.
    name = "</script>\x1b\u2028" + "x" * 100_000 + "\ud800"
    out = io.StringIO()
    write_trace([{"kind": "kernel", "kShortName": name, "kDuration": 10, "start_ns": 0}], out)
    assert "\x1b" not in out.getvalue()
    assert [e["name"] for e in json.loads(out.getvalue())["traceEvents"] if e["ph"] == "X"] == [name]


def test_arguments_of_odd_types_are_shown_as_they_are():
    # The record contract allows any JSON in an argument: a shape that is not a list is no shape.
    d = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": 1000, "start_ns": 0, "end_ns": 1000,
         "pid": 1, "tid": 1, "device": 0, "stream": 7, "op": ["mm"], "mod": ["aten"],
         "args": [{"name": "a", "type": "tensor", "shape": True, "value": 3}, {"name": "b", "shape": [2, 3],
                                                                              "dtype": "float32"}]}
    out = io.StringIO()
    write_trace(iter([d]), out)
    (gpu,) = [e for e in json.loads(out.getvalue())["traceEvents"] if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE]
    assert gpu["args"]["shapes"] == "3, float32[2, 3]"


@pytest.mark.parametrize("as_string", [True, False])
def test_a_name_given_as_one_string_is_a_name_not_its_first_letter(as_string):
    # docs/record.md: mod and op are lists, but a forward link's (parse writes them so) and a legacy line's may be
    # one string; the trace shows the name either way.
    def names(v):
        return v if as_string else [v]

    d = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": 1000, "start_ns": 0, "end_ns": 1000,
         "pid": 1, "tid": 1, "device": 0, "stream": 7, "dir": "bprop", "schema": 2,
         "op": names("nll_loss_backward"), "mod": names("aten"),
         "fwd": {"op": names("cross_entropy"), "mod": names("torch.nn.functional"), "args": []}}
    out = io.StringIO()
    write_trace(iter([d]), out)
    (gpu,) = [e for e in json.loads(out.getvalue())["traceEvents"] if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE]
    assert gpu["args"]["op"] == "aten.nll_loss_backward"
    assert gpu["args"]["forward op"] == "torch.nn.functional.cross_entropy"


def test_the_forward_op_of_parses_records_is_whole(resnet):
    # parse's records: the forward link's op is one string (the case above, from a real capture).
    evs = _trace(resnet)["traceEvents"]
    fwd_ops = {e["args"]["forward op"] for e in evs if e["ph"] == "X" and "forward op" in e.get("args", {})}
    assert "torch.nn.functional.conv2d" in fwd_ops and all(len(op.rsplit(".", 1)[-1]) > 1 for op in fwd_ops)


def _without_range_times(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in d.items() if k != "range_ns"} for d in records]


@pytest.mark.parametrize("measured", [True, False])
def test_cpu_ranges_are_slices_that_nest_around_their_launches(resnet, measured):
    """Every record's enclosing ranges become slices on its launching thread: from push to pop where parse wrote
    the ranges' times, else from the first launch made in the range to the last (records without ``range_ns``, as
    an older parse wrote them). Either way each launch lies inside a slice of each of its ranges, slices on a
    thread nest (a child never sticks out of its parent), and each training step is one slice."""
    records = resnet if measured else _without_range_times(resnet)
    evs = _trace(records)["traceEvents"]
    ranges = [e for e in evs if e.get("cat") == "range"]
    steps_in_records = {r for d in resnet for r in d.get("ranges") or () if r.startswith("ProfilerStep#")}
    assert steps_in_records  # the capture has its steps: the check below is not vacuous
    # each slice says what its times are (a Perfetto user would take a drawn one for measured otherwise)
    said = "the range's push to its pop" if measured else "not its push and pop times"
    assert ranges and all(said in e["args"]["times"] for e in ranges)
    assert sorted(e["name"] for e in ranges if e["name"].startswith("ProfilerStep#")) == sorted(steps_in_records)
    by_thread: dict = {}
    for e in ranges:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for d in resnet:
        if d.get("api_start_ns") is None or not d.get("ranges"):
            continue
        a0, a1 = d["api_start_ns"] / 1000, d["api_end_ns"] / 1000
        mine = by_thread[(d["pid"], d["tid"])]
        for name in set(d["ranges"]):
            assert any(t0 - 1e-6 <= a0 and a1 <= t1 + 1e-6 for t0, t1, n in mine if n == name), (name, a0)
    for slices in by_thread.values():
        open_ends: list = []
        for t0, t1, _n in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= t0 + 1e-6:
                open_ends.pop()
            assert not open_ends or t1 <= open_ends[-1] + 1e-6  # nested in the enclosing slice
            open_ends.append(t1)


def test_measured_range_slices_are_the_exports_push_and_pop(resnet, tmp_path):
    # The independent reference: the NVTX push/pop rows of the export itself, read with sqlite3. Each training
    # step's slice starts at its push and lasts until its pop, to the nanosecond (times in us, ns as the fraction).
    import lzma
    import shutil
    import sqlite3

    db = tmp_path / "resnet.sqlite"
    with lzma.open(DATA / "resnet.sqlite.xz") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(db)
    cols = {r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")}
    text = "coalesce(e.text, s.value)" if "textId" in cols else "e.text"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if "textId" in cols else ""
    steps = {name: (start, end) for name, start, end in con.execute(
        f"SELECT {text}, e.start, e.end FROM NVTX_EVENTS e {join} WHERE {text} LIKE 'ProfilerStep#%'")}
    con.close()
    evs = _trace(resnet)["traceEvents"]
    slices = {e["name"]: (e["ts"], e["dur"]) for e in evs if e.get("cat") == "range" and e["name"] in steps}
    assert len(slices) == len(steps) >= 1
    for name, (start, end) in steps.items():
        ts, dur = slices[name]
        assert round(ts * 1000) == start and round((ts + dur) * 1000) == end, name


def test_a_replayed_graph_nodes_ranges_are_drawn_inside_the_measured_step():
    # A replayed kernel's node ranges were pushed at the graph's capture (parse writes null times for them); the
    # replay's own step range is measured. The node's slices are drawn at the replay's launch call, inside the
    # step, and say so.
    d = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": 1000, "start_ns": 9000, "end_ns": 10000,
         "pid": 1, "tid": 1, "device": 0, "stream": 7, "api": "cudaGraphLaunch", "api_start_ns": 5000,
         "api_end_ns": 6000, "correlation_id": 3, "ranges": ["ProfilerStep#4", "module:Net", "aten::mm"],
         "range_ns": [1000, 20000, None, None, None, None]}
    evs = json.loads(_trace_of([d]))["traceEvents"]
    ranges = {e["name"]: e for e in evs if e.get("cat") == "range"}
    step, net, mm = ranges["ProfilerStep#4"], ranges["module:Net"], ranges["aten::mm"]
    assert (step["ts"], step["dur"]) == (1.0, 19.0) and "push to its pop" in step["args"]["times"]
    for e in (net, mm):
        assert (e["ts"], e["dur"]) == (5.0, 1.0) and "not its push and pop times" in e["args"]["times"]


@pytest.mark.parametrize("times", [[1000], [1000, "x", 2, 3, 4, 5], [2000, 1000, None, None, None, None], "1,2"])
def test_range_times_that_do_not_fit_their_ranges_are_not_used(times):
    # A hand-made or damaged record: times of the wrong length, type or order, or that do not hold the launch call,
    # are not drawn as measured.
    d = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": 1000, "start_ns": 9000, "end_ns": 10000,
         "pid": 1, "tid": 1, "device": 0, "stream": 7, "api": "cudaLaunchKernel", "api_start_ns": 5000,
         "api_end_ns": 6000, "correlation_id": 3, "ranges": ["step", "module:Net", "aten::mm"], "range_ns": times}
    evs = json.loads(_trace_of([d]))["traceEvents"]
    ranges = [e for e in evs if e.get("cat") == "range"]
    assert len(ranges) == 3
    assert all("not its push and pop times" in e["args"]["times"] for e in ranges)


def _trace_of(records: list[dict]) -> str:
    out = io.StringIO()
    write_trace(iter(records), out)
    return out.getvalue()


def test_a_pytorch_profiler_traces_epoch_times_keep_their_nanoseconds():
    # A PyTorch-profiler trace counts from the epoch (1.7e18 ns): as microseconds in a double its step is a quarter
    # of a microsecond, and a range's slice ended after its parent's in a viewer. The trace counts from an origin
    # written in otherData instead. A real trace from another project (DeepSeek's published H800 profile).
    from shared_files import CORPUS, require_shared

    require_shared()
    buf = io.StringIO()
    parse_file(str(CORPUS / "external-2026-12" / "deepseek_profile-data_train_h800.json"), buf)
    records = list(read_lines(buf.getvalue().splitlines()))
    t = json.loads(_trace_of(records))
    origin = t["otherData"]["ts_origin_ns"]
    assert origin > 10 ** 18 and origin % 10 ** 9 == 0  # a whole second of the epoch
    first = next(e for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE)
    assert round(first["ts"] * 1000) + origin == records[0]["start_ns"]  # to the nanosecond
    by_thread: dict = {}
    for e in t["traceEvents"]:
        if e.get("cat") == "range":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    assert sum(map(len, by_thread.values())) > 100
    for slices in by_thread.values():  # each nests in its parent, to a thousandth of a nanosecond
        open_ends: list = []
        for t0, t1 in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= t0 + 1e-6:
                open_ends.pop()
            assert not open_ends or t1 <= open_ends[-1] + 1e-6
            open_ends.append(t1)
