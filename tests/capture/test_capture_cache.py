"""The capture's caches change its cost, never its markers: sites keyed by bytecode offset, texts from cached
entries. Expected texts are written out by hand from docs/markers.md, or are json.dumps of the documented dict."""
from __future__ import annotations

import gc
import json
import sys

import torch

import pyprof
from pyprof.nvtx import RecordingSink, payload

HERE = __file__


def _texts(sink) -> list[str]:
    return [e[1] for e in sink.events if e[0] == "push"]


def _line() -> int:
    return sys._getframe(1).f_lineno


def test_two_calls_on_one_line_and_one_call_on_two_lines_get_their_own_lines():
    x = torch.ones(2)
    sink = RecordingSink()
    with pyprof.profiling(sink=sink, modules=False, backward=False):
        for _ in range(3):  # the second and third rounds hit the cache: same text, the same line each time
            first = _line() + 1
            torch.neg(x); torch.neg(x)  # noqa: E702 - two calls at one line, two bytecode offsets
            torch.neg(
                x)  # a call over two lines is named by its first, as f_lineno names it
    sites = [json.loads(t)["site"] for t in _texts(sink)]
    assert sites == [f"{HERE}:{first}", f"{HERE}:{first}", f"{HERE}:{first + 1}"] * 3


def test_a_cached_site_keeps_its_code_object_so_a_new_function_never_takes_its_line():
    # Functions made and dropped in a loop: a freed code object's id can be given to the next one. Each must
    # still name its own line, which differs (the source is padded by one more line each time).
    sink = RecordingSink()
    x = torch.ones(2)
    with pyprof.profiling(sink=sink, modules=False, backward=False):
        for pad in range(6):
            namespace = {"torch": torch}
            exec(compile("\n" * pad + "def f(x):\n    return torch.neg(x)\n", "<made>", "exec"), namespace)
            namespace["f"](x)
            del namespace
            gc.collect()
    assert [json.loads(t)["site"] for t in _texts(sink)] == [f"<made>:{pad + 2}" for pad in range(6)]


def test_marker_text_is_json_dumps_of_the_documented_dict():
    # The fast text assembly against json.dumps of the dict docs/markers.md describes, written out here.
    t = torch.zeros(2, 3, dtype=torch.float16).t()
    p = torch.nn.Parameter(torch.zeros(4))

    def tensor(shape, dtype, contig, grad):
        return {"type": "tensor", "shape": shape, "dtype": dtype, "contig": contig, "device": -1, "grad": grad}

    args = (t, [p, t], 1.0, float("inf"), "é" * 70, None, (2, 2), torch.int64, 3 + 1j)
    kwargs = {"dim": -1, "out": p}
    expected = {"pyprof": 1, "mod": "torch", "op": "f", "args": [
        tensor([3, 2], "float16", False, False),
        {"type": "tensorlist", "items": [tensor([4], "float32", True, True), tensor([3, 2], "float16", False, False)]},
        {"type": "float", "value": 1.0}, {"type": "float", "value": "inf"},
        {"type": "str", "value": "é" * 61 + "..."}, {"type": "none", "value": None},
        {"type": "tuple", "value": [2, 2]}, {"type": "dtype", "value": "int64"},
        {"type": "complex", "value": [3.0, 1.0]},
        {"name": "dim", "type": "int", "value": -1}, {"name": "out", **tensor([4], "float32", True, True)}],
        "site": "a.py:1"}
    for _ in range(2):  # the second time from the cached entry texts
        assert payload.op_marker("torch", "f", args, kwargs, "a.py:1") == json.dumps(expected, separators=(",", ":"))
    assert payload.op_marker("torch", "f", (), {}, "", ["a.py:1", "b.py:2"]) == (
        '{"pyprof":1,"mod":"torch","op":"f","args":[],"site":"","stack":["a.py:1","b.py:2"]}')


def test_a_scalar_that_changes_each_step_gets_its_value_each_step():
    xs = [torch.ones(2), torch.ones(3)]
    sink = RecordingSink()
    with pyprof.profiling(sink=sink, modules=False, backward=False):
        for step in (1, 2):
            torch._foreach_mul_(xs, [0.5 * step, 0.25 * step])
    values = [json.loads(t)["args"][1]["value"] for t in _texts(sink)]
    assert values == [[0.5, 0.25], [1.0, 0.5]]
