"""Unit tests of the PyTorch profiler (Kineto JSON) reader on small synthetic traces.

The event shapes (cat, args keys, the backward node's evaluate_function wrapper, Sequence number and
Fwd thread id) copy a real ``export_chrome_trace`` of torch 2.x on the CPU; the GPU events copy
Kineto's kernel / cuda_runtime fields. Real H200 traces will replace these as fixtures.
"""
from __future__ import annotations

import gzip
import io
import json

import pytest
from parse_output import records_of

from pyprof.common import InputError
from pyprof.parse import parse_file
from pyprof.record import read_lines


PID, MAIN, BWD = 4242, 4242, 4300


def op(name, ts, dur, tid=MAIN, **args):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(ts, corr, tid=MAIN, name="cudaLaunchKernel"):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": 2.5,
            "args": {"cbid": 211, "correlation": corr}}


def kernel(name, ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": corr,
                     "registers per thread": 90, "shared memory": 16384, "blocks per SM": 0.5,
                     "grid": [4, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 6}}


def trace() -> dict:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "layer:encoder", "pid": PID, "tid": MAIN,
         "ts": 1000.0, "dur": 500.0, "args": {}},
        op("aten::linear", 1010.0, 100.0, **{"Sequence number": 0, "Fwd thread id": 0,
           "Input Dims": [[2, 8], [4, 8], [4]], "Input type": ["c10::Half", "c10::Half", "c10::Half"],
           "Concrete Inputs": ["", "", ""]}),
        op("aten::addmm", 1020.0, 80.0, **{"Sequence number": 1, "Fwd thread id": 0,
           "Input Dims": [[4], [2, 8], [8, 4], [], []],
           "Input type": ["c10::Half", "c10::Half", "c10::Half", "Scalar", "Scalar"],
           "Concrete Inputs": ["", "", "", "1", "1"]}),
        launch(1030.0, corr=11),
        kernel("void gemm<__half>(int)", 1040.0, 5.125, corr=11),
        op("autograd::engine::evaluate_function: AddmmBackward0", 2000.0, 300.0, tid=BWD,
           **{"Sequence number": 1, "Fwd thread id": 1}),
        op("AddmmBackward0", 2001.0, 290.0, tid=BWD, **{"Sequence number": 1, "Fwd thread id": 1}),
        op("aten::mm", 2010.0, 100.0, tid=BWD, **{"Input Dims": [[2, 4], [4, 8]],
                                                  "Input type": ["c10::Half", "c10::Half"]}),
        launch(2020.0, corr=12, tid=BWD),
        kernel("void gemm<__half>(int)", 2100.0, 4.0, corr=12),
        op("aten::mm", 2150.0, 100.0, tid=BWD),
        launch(2160.0, corr=13, tid=BWD),
        kernel("void gemm<__half>(int)", 2200.0, 4.0, corr=13),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
         "ts": 3000.0, "dur": 1.0, "args": {"device": 0, "stream": 7, "correlation": 14, "bytes": 64}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "ignored", "pid": PID, "tid": MAIN, "ts": 1.0},
    ]
    # Kineto does not write events in time order: the reader must sort.
    events.reverse()
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem":
            150000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}], "traceEvents": events,
            "traceName": "x.pt.trace.json"}


def parse(path) -> list[dict]:
    out = io.StringIO()
    parse_file(str(path), out)
    return list(read_lines(out.getvalue().splitlines()))


@pytest.mark.parametrize("gz", [False, True])
def test_kineto_kernels_get_ops_shapes_and_forward_links(tmp_path, gz):
    data = json.dumps(trace()).encode()
    path = tmp_path / ("t.pt.trace.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    fwd, dgrad, wgrad, copy = parse(path)
    assert (fwd["start_ns"], fwd["kDuration"]) == (1040000, 5125)
    assert fwd["kShortName"] == "gemm" and fwd["gpu"] == "NVIDIA H200" and fwd["gpu_props"]["numSms"] == 132
    assert fwd["registers"] == 90 and fwd["grid"] == [4, 1, 1]
    assert fwd["op"] == ["linear", "addmm"] and fwd["mod"] == ["aten", "aten"]
    assert fwd["args"] == [{"type": "tensor", "shape": [2, 8], "dtype": "float16"},
                           {"type": "tensor", "shape": [4, 8], "dtype": "float16"},
                           {"type": "tensor", "shape": [4], "dtype": "float16"}]
    assert fwd["layer"] == ["encoder"] and fwd["dir"] == "fprop" and fwd["seqId"] == [0, 1]
    assert (fwd["api"], fwd["pid"], fwd["tid"]) == ("cudaLaunchKernel", PID, MAIN)
    for k, sub in ((dgrad, 0), (wgrad, 1)):
        assert k["dir"] == "bprop" and k["op"] == ["mm"] and k["subSeqId"] == sub
        assert k["fwd"]["op"] == "linear" and k["fwd"]["seq"] == 1 and k["fwd"]["layer"] == ["encoder"]
        assert k["fwd"]["args"][0]["shape"] == [2, 8]
    assert (copy["kind"], copy["copy_kind"], copy["bytes"], copy["api"]) == ("memcpy", "HtoD", 64, None)


def test_kineto_scalars_from_concrete_inputs(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace()))
    recs = parse(path)
    # addmm's beta/alpha are Scalars with Concrete Inputs "1": decoded as ints.
    from pyprof.parse.attribute.markers import seq_marker

    m = seq_marker("aten::addmm", 1, [[4], [2, 8], [8, 4], [], []],
                   ["c10::Half", "c10::Half", "c10::Half", "Scalar", "Scalar"], ["", "", "", "1", "1"])
    assert m.get_args()[3:] == [{"type": "int", "value": 1}, {"type": "int", "value": 1}]
    assert len(recs) == 4


def test_truncated_trace_is_refused_before_output(tmp_path):
    data = json.dumps(trace()).encode()
    path = tmp_path / "t.json"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated"):
        parse(path)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(data)[:200])
    with pytest.raises(InputError):
        parse(gz)


def test_json_that_is_not_a_trace(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": [1, 2, 3]}')
    with pytest.raises(InputError, match="traceEvents"):
        parse(path)


def test_trace_without_gpu_events_has_no_records(tmp_path):
    t = trace()
    t["traceEvents"] = [e for e in t["traceEvents"] if e["cat"] not in ("kernel", "gpu_memcpy")]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(t))
    assert parse(path) == []


def test_real_torch_profiler_cpu_trace_with_injected_gpu_events(tmp_path):
    """The CPU side from a real torch.profiler run (this machine has no GPU): one launch and kernel are
    injected inside each aten::addmm / aten::mm, as a CUDA run would have them."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    x = torch.randn(2, 8, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(x).sum().backward()
    path = tmp_path / "real.json"
    prof.export_chrome_trace(str(path))
    trace_data = json.loads(path.read_text())
    extra = []
    ops = [e for e in trace_data["traceEvents"] if e.get("cat") == "cpu_op"]
    for ev in ops:
        if ev["name"] in ("aten::addmm", "aten::mm"):
            corr = len(extra) + 1
            # Launch after the op's own children (addmm may run a copy_ first), as the GEMM's launch is.
            inner_end = max([c["ts"] + c["dur"] for c in ops if c is not ev and c["tid"] == ev["tid"]
                             and ev["ts"] <= c["ts"] and c["ts"] + c["dur"] <= ev["ts"] + ev["dur"]],
                            default=ev["ts"])
            ts = (inner_end + ev["ts"] + ev["dur"]) / 2
            extra.append({**launch(ts, corr), "pid": ev["pid"], "tid": ev["tid"], "dur": 0.001})
            extra.append(kernel("gemm", ts + 5, 1.5, corr))
    trace_data["traceEvents"] += extra
    path.write_text(json.dumps(trace_data))
    fwd, dgrad, wgrad = parse(path)
    assert fwd["op"] == ["linear", "addmm"] and fwd["dir"] == "fprop"
    assert fwd["args"][0] == {"type": "tensor", "shape": [2, 8], "dtype": "float32"}
    for k, sub in ((dgrad, 0), (wgrad, 1)):
        assert k["dir"] == "bprop" and k["op"] == ["mm"] and k["subSeqId"] == sub
        assert k["fwd"]["op"] == "linear" and k["fwd"]["args"][1]["shape"] == [4, 8]


def test_worker_request_falls_back_in_process_for_traces(tmp_path):
    from pyprof.parse import open_source
    from pyprof.parse.write.writer import lines

    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace()))
    out, stats = lines(open_source(str(path)), worker=True)
    out = list(out)
    assert out[0].startswith('{"pyprof_header":') and len(records_of(out)) == 4 and stats.kernels == 3


def test_pytorch_1_8_preview_layout(tmp_path):
    """PyTorch 1.8 previews wrote the events as a bare JSON array (no traceEvents object), "Input dims" in lower
    case and thread ids as strings; a byte-order mark may precede any trace."""
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": PID, "tid": str(MAIN), "ts": 900, "dur": 900,
         "args": {"Device": 0, "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": PID, "tid": str(MAIN), "ts": 1000, "dur": 100,
         "args": {"Input dims": [[2, 4], [4, 8]], "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": str(MAIN), "ts": 1010,
         "dur": 5, "args": {"correlation": 3}},
        {"ph": "X", "cat": "Kernel", "name": "void sgemm<float>(int)", "pid": 0, "tid": "stream 7", "ts": 1100,
         "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 3}},
    ]
    path = tmp_path / "preview.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(events).encode())
    out = io.StringIO()
    parse_file(str(path), out)
    (rec,) = list(read_lines(out.getvalue().splitlines()))
    assert rec["op"] == ["mm"] and rec["tid"] == MAIN and rec["ranges"] == ["ProfilerStep#3", "aten::mm"]
    assert [a["shape"] for a in rec["args"]] == [[2, 4], [4, 8]]


@pytest.mark.parametrize("filler", ["x", 'x\\"'], ids=["plain", "escaped quotes"])
def test_a_string_past_the_bound_is_refused(tmp_path, monkeypatch, filler):
    # kineto_json.MAX_STRING_BYTES lowered to 1 MB for the test: a kernel name of 2 MB (escaped quotes inside it do
    # not end it) is refused before any output; one of half a MB parses, name whole.
    import pyprof.parse.readers.kineto_json as kineto_json

    monkeypatch.setattr(kineto_json, "MAX_STRING_BYTES", 1 << 20)
    for mb, ok in ((0.5, True), (2, False)):
        name = "void k<" + filler * int((mb * (1 << 20)) // len(filler)) + ">(int)"
        t = trace()
        t["traceEvents"] = [kernel(name, e["ts"], e["dur"], e["args"]["correlation"]) if e["cat"] == "kernel" else e
                            for e in t["traceEvents"]]
        path = tmp_path / "t.json"
        path.write_text(json.dumps(t))
        if ok:
            assert [d["kLongName"] for d in parse(path) if d["kind"] == "kernel"] == [name] * 3
        else:
            with pytest.raises(InputError, match="longer than 1 MB"):
                parse(path)
