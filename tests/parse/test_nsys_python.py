"""Nsight Systems' PyTorch shapes payloads (--pytorch=functions-trace-shapes, nsys 2026.4) and Python backtraces of
CUDA calls (--python-backtrace=cuda), which the GPU machine's nsys 2025.3.1 refused (tests/data/paths/paths.txt):
read from the documented export schema, tested on exports built from it (nsys_schema.py)."""
from __future__ import annotations

import io
import json

import pytest

from nsys_schema import Export2026
from pyprof.parse import parse_file
from pyprof.parse.readers.nsys_python import python_site
from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build

# linear(x[8, 1024], W[4096, 1024], b[4096]): 2 x M x N x K = 2 x 8 x 4096 x 1024 = 67,108,864 FLOPs (bias ignored)
LINEAR_FLOPS = 67_108_864
SHAPES = {"sizes": [[8, 1024], [4096, 1024], [4096]],
          "dtypes": ["torch.float16", "torch.float16", "torch.float16"]}
ARGS = [{"type": "tensor", "shape": [8, 1024], "dtype": "float16"},
        {"type": "tensor", "shape": [4096, 1024], "dtype": "float16"},
        {"type": "tensor", "shape": [4096], "dtype": "float16"}]


def _records(path) -> list[dict]:
    out = io.StringIO()
    parse_file(str(path), out)
    return [json.loads(x) for x in out.getvalue().splitlines() if '"kind"' in x]


def _linear_flops(recs) -> int | None:
    (t,) = build(aggregate([("x", recs)]), ["operators"])
    c = {name: i for i, name in enumerate(t.columns)}
    return next(r[c["flops"]] for r in t.rows if r[c["op"]] == "linear")


@pytest.mark.parametrize("where", ["jsonText", "jsonTextId"])
def test_functions_trace_shapes_payload_gives_args_and_flops(tmp_path, where):
    x = Export2026(tmp_path / "shapes.sqlite")
    payload = json.dumps(SHAPES)
    x.range(900, 1300, "torch.nn.modules.Linear.forward")
    x.range(1000, 1200, "torch.nn.functional.linear", **({"json_text": payload} if where == "jsonText" else
                                                         {"json_registered": payload}))
    x.launch(1050, 1100, corr=7, kernel_start=2000)
    (rec,) = _records(x.close())
    assert rec["op"] == ["linear"] and rec["mod"] == ["torch.nn.functional"] and rec["layer"] == ["Linear"]
    assert rec.get("args", []) == ARGS
    assert rec["ranges"] == ["module:Linear", "torch.nn.functional.linear"]
    assert _linear_flops([rec]) == LINEAR_FLOPS


def test_payload_without_shapes_or_unreadable_leaves_the_range_as_functions_trace_reads_it(tmp_path):
    x = Export2026(tmp_path / "odd.sqlite")
    x.range(1000, 1200, "torch.nn.functional.linear", json_text='{"training": true}')
    x.launch(1050, 1100, corr=7, kernel_start=2000)
    x.range(3000, 3200, "torch.nn.functional.linear", json_text="{not json")
    x.launch(3050, 3100, corr=8, kernel_start=4000)
    x.range(5000, 5200, "my range", json_text=json.dumps(SHAPES))  # a user's range is no op, shapes or not
    x.launch(5050, 5100, corr=9, kernel_start=6000)
    recs = _records(x.close())
    assert [r.get("op", []) for r in recs] == [["linear"], ["linear"], []]
    assert [r.get("args", []) for r in recs] == [[], [], []]
    assert recs[2]["ranges"] == ["my range"]
    assert _linear_flops(recs) is None


def test_binary_payload_is_not_decoded(tmp_path):
    # binaryData's format is left to docs the schema does not include: the range reads as functions-trace's
    x = Export2026(tmp_path / "binary.sqlite")
    x.range(1000, 1200, "torch.nn.functional.linear", binary="\x01\x02\x03")
    x.launch(1050, 1100, corr=7, kernel_start=2000)
    (rec,) = _records(x.close())
    assert rec["op"] == ["linear"] and rec.get("args", []) == []


# A call stack of a cudaLaunchKernel under --python-backtrace=cuda, innermost first: the CUDA call's own native
# frames, torch's Python frames, then the user's (how nsys writes a Python frame is not in the schema: here the
# module holds file:line)
STACK = [("cudaLaunchKernel", "/usr/local/cuda/lib64/libcudart.so.13"),
         ("at::native::addmm_out_cuda", "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"),
         ("forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:125"),
         ("_call_impl", "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py:1784"),
         ("forward", "/home/user/net.py:26"),
         ("step", "/home/user/train.py:40"),
         ("<module>", "/home/user/train.py:52")]


def test_python_backtrace_gives_the_users_line(tmp_path):
    x = Export2026(tmp_path / "bt.sqlite")
    x.callchain(1, STACK)
    x.callchain(2, STACK[:2])  # native frames only: no line
    x.range(1000, 1200, "torch.nn.functional.linear", json_text=json.dumps(SHAPES))
    x.launch(1050, 1100, corr=7, kernel_start=2000, callchain=1)
    x.launch(3050, 3100, corr=8, kernel_start=4000, callchain=1)  # outside every range: the line alone
    x.launch(5050, 5100, corr=9, kernel_start=6000, callchain=2)
    x.launch(7050, 7100, corr=10, kernel_start=8000)  # no call stack
    recs = _records(x.close())
    assert [r.get("callsite") for r in recs] == ["/home/user/net.py:26", "/home/user/net.py:26", None, None]
    assert recs[0]["op"] == ["linear"] and recs[0].get("args", []) == ARGS
    assert recs[1].get("op", []) == [] and recs[1].get("dir", "") == ""


def test_a_range_that_names_a_line_keeps_it(tmp_path):
    # pyprof.init()'s own op range names the calling line: the backtrace does not replace it
    x = Export2026(tmp_path / "init.sqlite")
    x.callchain(1, STACK)
    marker = json.dumps({"pyprof": 1, "mod": "torch.nn.functional", "op": "linear", "args": ARGS,
                         "site": "net.py:26"}, separators=(",", ":"))
    x.range(1000, 1200, marker)
    x.launch(1050, 1100, corr=7, kernel_start=2000, callchain=1)
    (rec,) = _records(x.close())
    assert rec.get("callsite") == "net.py:26"


@pytest.mark.parametrize("symbol, module, site", [
    ("forward", "/home/user/net.py:26", "/home/user/net.py:26"),
    ("/home/user/net.py(26): forward", "python3.12", "/home/user/net.py:26"),  # the PyTorch profiler's form
    ("forward", "/home/user/net.py", "/home/user/net.py"),  # no line given: the file alone
    ("forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:125", None),  # torch's own
    ("cudaLaunchKernel", "/usr/local/cuda/lib64/libcudart.so.13", None),  # native
    ("<module>", "<string>", None),
])
def test_python_site_of_a_frame(symbol, module, site):
    assert python_site(symbol, module) == site


def test_worker_sweep_gives_the_same_records(tmp_path):
    from pyprof.parse.readers.nsys import NsysSource
    from pyprof.parse.write.writer import lines

    x = Export2026(tmp_path / "w.sqlite")
    x.callchain(1, STACK)
    for i in range(50):
        x.range(1000 + 1000 * i, 1200 + 1000 * i, "torch.nn.functional.linear", json_text=json.dumps(SHAPES))
        x.launch(1050 + 1000 * i, 1100 + 1000 * i, corr=i + 1, kernel_start=100_000 + 1000 * i,
                 callchain=1 if i % 2 else None)
    path = x.close()
    out = []
    for worker in (False, True):
        src = NsysSource(str(path))
        got, _ = lines(src, worker=worker)
        out.append(list(got))
        src.close()
    assert out[0] == out[1]
    recs = [json.loads(line) for line in out[0][1:] if '"kind"' in line]
    assert [r.get("callsite") for r in recs] == [None if i % 2 == 0 else "/home/user/net.py:26" for i in range(50)]
