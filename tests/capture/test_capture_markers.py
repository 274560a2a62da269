"""What the markers say: op, module, arguments, call site; and that torch behaves exactly as before."""
from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pyprof
from pyprof.nvtx import RecordingSink, payload

HERE = __file__


def line_of(marker: str) -> int:
    """Line number in this file of the first line containing ``marker`` (a comment tag)."""
    for i, text in enumerate(open(HERE), 1):
        if marker in text and "line_of(" not in text:
            return i
    raise AssertionError(marker)


def test_tensor_args_shapes_dtypes_and_call_site(capture):
    x = torch.randn(8, 3, 16, 16, dtype=torch.float32)
    w = torch.randn(4, 3, 3, 3)
    F.conv2d(x, w, None, stride=2, padding=(1, 1))  # tag:conv
    (m,) = capture.ops("conv2d", "torch.nn.functional")
    assert m["pyprof"] == 1
    assert m["site"] == f"{HERE}:{line_of('tag:conv')}"
    a = m["args"]
    assert a[0] == {"type": "tensor", "shape": [8, 3, 16, 16], "dtype": "float32", "contig": True, "device": -1,
                    "grad": False}
    assert a[1]["shape"] == [4, 3, 3, 3]
    assert a[2] == {"type": "none", "value": None}
    assert a[3] == {"name": "stride", "type": "int", "value": 2}
    assert a[4] == {"name": "padding", "type": "tuple", "value": [1, 1]}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.bool])
def test_dtypes_named_as_parse_expects(capture, dtype):
    x = torch.zeros(2, 3, dtype=dtype)
    torch.flatten(x)
    (m,) = capture.ops("flatten", "torch")
    assert m["args"][0]["dtype"] == str(dtype).split(".")[1]


def test_requires_grad_recorded(capture):
    w = torch.randn(3, requires_grad=True)
    torch.mul(torch.randn(3), w)
    (m,) = capture.ops("mul", "torch")
    assert [a["grad"] for a in m["args"]] == [False, True]


def test_non_contiguous_tensor_flagged(capture):
    x = torch.randn(4, 6).t()
    torch.abs(x)
    (m,) = capture.ops("abs", "torch")
    assert m["args"][0]["contig"] is False and m["args"][0]["shape"] == [6, 4]


def test_zero_dim_tensor_recorded_by_shape_never_read():
    class NoRead(torch.Tensor):
        def item(self):
            raise AssertionError("the marker read a tensor's value")

    s = torch.tensor(3.0).as_subclass(NoRead)
    entry = payload.describe(s)
    assert entry["shape"] == [] and entry["dtype"] == "float32" and "value" not in entry


def test_operators_and_in_place_variants(capture):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    a @ b
    a += 1
    -a
    a[0, 1:3]
    names = [m["op"] for m in capture.ops(mod="torch.Tensor")]
    for op in ("__matmul__", "__iadd__", "__neg__", "__getitem__"):
        assert op in names
    (get,) = capture.ops("__getitem__")
    assert get["args"][1]["type"] == "tuple"


def test_tensor_list_flattened(capture):
    ts = [torch.randn(2, 3), torch.randn(4, 3)]
    torch.cat(ts, dim=0)
    (m,) = capture.ops("cat", "torch")
    assert m["args"][0]["type"] == "tensorlist"
    assert [t["shape"] for t in m["args"][0]["items"]] == [[2, 3], [4, 3]]
    assert m["args"][1] == {"name": "dim", "type": "int", "value": 0}


def test_long_strings_cut_and_special_floats_valid_json(capture):
    x = torch.randn(3)
    torch.mul(x, float("inf"))
    (m,) = capture.ops("mul", "torch")
    assert m["args"][1] == {"type": "float", "value": "inf"}
    long = payload.describe("x" * 500)
    assert long["type"] == "str" and len(long["value"]) == payload.MAX_STR_CHARS and long["value"].endswith("...")


def test_call_site_skips_torch_frames_to_user_code(capture):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    capture.clear()
    model(torch.randn(2, 4))  # tag:model-call
    (lin,) = capture.ops("linear", "torch.nn.functional")
    assert lin["site"] == f"{HERE}:{line_of('tag:model-call')}"


def test_module_ranges_named_by_qualified_name(capture):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(4, 4)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block(), Block()])

        def forward(self, x):
            for b in self.layers:
                x = b.attn(x)
            return x

    Net()(torch.randn(1, 4))
    modules = [p for p in capture.pushes() if isinstance(p, dict) and "module" in p]
    assert [m["module"] for m in modules] == ["Net", "layers.0.attn", "layers.1.attn"]
    assert modules[1]["type"] == "Linear"
    assert capture.balanced()


def test_layer_context_manager_and_decorator(capture):
    @pyprof.layer("head")
    def head(x):
        return torch.relu(x)

    with pyprof.layer("block1"):
        head(torch.randn(2))
    texts = [p for p in capture.pushes() if isinstance(p, str)]
    assert texts == ["layer:block1", "layer:head"]
    assert capture.balanced()


def test_layer_outside_init_is_silent():
    with pyprof.layer("x"):
        pass  # nothing to assert but that it does not need init()


def test_call_ids_distinct_and_increasing(capture):
    x = torch.randn(3)
    capture.clear()
    for _ in range(3):
        torch.sin(x)
    ids = [e[2] for e in capture.sink.events if e[0] == "push"]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    texts = {e[1] for e in capture.sink.events if e[0] == "push"}
    assert len(texts) == 1  # one string for a repeated call: NVTX registers it once


def test_stack_option_lists_user_frames():
    sink = RecordingSink()
    pyprof.init(sink=sink, stack=True)
    try:
        def inner():
            return torch.cos(torch.zeros(1))  # tag:inner
        inner()  # tag:outer
    finally:
        pyprof.uninit()
    (text,) = [e[1] for e in sink.events if e[0] == "push" and '"cos"' in e[1]]
    import json
    stack = json.loads(text)["stack"]
    assert stack[-2:] == [f"{HERE}:{line_of('tag:outer')}", f"{HERE}:{line_of('tag:inner')}"]


def test_exceptions_pass_through_unchanged(capture):
    with pytest.raises(RuntimeError) as wrapped:
        torch.mm(torch.randn(2, 3), torch.randn(4, 5))
    pyprof.uninit()
    with pytest.raises(RuntimeError) as bare:
        torch.mm(torch.randn(2, 3), torch.randn(4, 5))
    assert str(wrapped.value) == str(bare.value)
    assert capture.balanced()


def test_gradients_identical():
    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.GELU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
        x = torch.randn(2, 3, 8, 8, requires_grad=True)
        loss = F.cross_entropy(model(x), torch.tensor([1, 3]))
        loss.backward()
        return [loss.detach()] + [x.grad] + [p.grad for p in model.parameters()]

    bare = run()
    with pyprof.profiling(sink=RecordingSink()):
        wrapped = run()
    for a, b in zip(bare, wrapped, strict=True):
        assert type(a) is type(b) and torch.equal(a, b)


def test_return_types_preserved(capture):
    x = torch.randn(5, 3)
    assert type(torch.max(x, dim=0)) is torch.return_types.max
    assert type(x.shape) is torch.Size
    assert isinstance(torch.nn.Parameter(torch.ones(2)) * 2, torch.Tensor)


def test_init_twice_harmless_and_uninit_restores_exactly():
    namespaces = [torch, torch.Tensor, torch.nn.functional, torch.linalg, torch.fft, torch.special, torch.jit,
                  torch.autograd.profiler.emit_nvtx]
    before = [dict(vars(ns)) for ns in namespaces]
    pyprof.init(sink=RecordingSink())
    n = len(pyprof.nvtx.state.patches.saved)
    assert torch.add is not before[0]["add"]
    pyprof.init(sink=RecordingSink())
    assert len(pyprof.nvtx.state.patches.saved) == n
    pyprof.uninit()
    assert [dict(vars(ns)) for ns in namespaces] == before
    assert not pyprof.is_initialized()


def test_function_captured_before_uninit_stops_emitting():
    sink = RecordingSink()
    pyprof.init(sink=sink)
    add = torch.add
    pyprof.uninit()
    add(torch.ones(1), torch.ones(1))
    assert sink.events == []


def test_wrap_autograd_function_forward_and_backward(capture):
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    pyprof.wrap(Scale, "forward")
    pyprof.wrap(Scale, "backward")
    x = torch.randn(3, requires_grad=True)
    Scale.apply(x, 2.0).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    (fwd,) = capture.ops("forward", "Scale")
    # ctx is not an argument worth recording: x and k are.
    assert fwd["args"] == [{"type": "tensor", "shape": [3], "dtype": "float32", "contig": True, "device": -1,
                            "grad": True},
                           {"type": "float", "value": 2.0}]
    assert len(capture.ops("backward", "Scale")) == 1


def test_wrap_module_class_skips_self(capture):
    class Affine(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))

        def forward(self, x):
            return self.w * x

    pyprof.wrap(Affine, "forward")
    Affine()(torch.randn(2, 4))
    (m,) = capture.ops("forward", "Affine")
    assert [a["shape"] for a in m["args"]] == [[2, 4]]


def test_wrap_extension_module_function(capture):
    ext = types.ModuleType("my_ext")
    ext.fused = lambda a, b: a * b + 1
    pyprof.wrap(ext, "fused")
    ext.fused(torch.ones(2), torch.ones(2))
    (m,) = capture.ops("fused", "my_ext")
    assert len(m["args"]) == 2


def test_wrap_rejects_missing_attribute():
    with pytest.raises(pyprof.common.UsageError, match="no callable attribute"):
        pyprof.wrap(nn.Linear, "no_such_method")


def test_wrap_undone_by_uninit():
    class K(nn.Module):
        def forward(self, x):
            return x

    original = K.__dict__["forward"]
    pyprof.init(sink=RecordingSink())
    pyprof.wrap(K, "forward")
    assert K.__dict__["forward"] is not original
    pyprof.uninit()
    assert K.__dict__["forward"] is original


def test_torchscript_and_trace_work_under_init(capture):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return F.relu(self.lin(x)) + torch.tanh(x)

    m, x = M(), torch.randn(2, 4)
    assert torch.equal(torch.jit.script(m)(x), m(x))
    assert torch.equal(torch.jit.trace(m, x)(x), m(x))
    assert torch.add is not torch._C._VariableFunctions.add  # still patched after scripting


def test_torch_compile_no_graph_break(capture):
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32))

    def f(x):
        return F.softmax(m(x) @ m(x).t(), dim=-1).sum() + torch.tanh(x).mean()

    explained = torch._dynamo.explain(f)(torch.randn(4, 16))
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_import_parse_and_prof_without_torch():
    import subprocess
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pyprof, pyprof.parse, pyprof.prof, pyprof.common\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "try:\n    pyprof.init()\nexcept ImportError:\n    print('capture needs torch')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "capture needs torch"


DTENSOR_SCRIPT = '''
import json, os, socket, sys
import torch, torch.distributed as dist
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group("gloo", rank=0, world_size=1)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
import pyprof
mesh = init_device_mesh("cpu", (1,))
# shards of an 8 x 8 tensor as rank 0 of two would hold them: 4 rows, then (uneven) 5 rows of a 9 x 8 one
half = DTensor.from_local(torch.randn(4, 8), mesh, [Shard(0)], run_check=False, shape=torch.Size([8, 8]),
                          stride=(8, 1))
uneven = DTensor.from_local(torch.randn(5, 8), mesh, [Shard(0)], run_check=False, shape=torch.Size([9, 8]),
                            stride=(8, 1))
sink = pyprof.RecordingSink()
pyprof.init(sink=sink, modules=False, backward=False)
torch._foreach_mul_([half, uneven], 2.0)
pyprof.uninit()
dist.destroy_process_group()
print(json.dumps([e[1] for e in sink.events if e[0] == "push"][0]))
'''


def test_a_dtensor_is_recorded_by_its_shard(tmp_path):
    # FSDP2's optimizer updates DTensor shards: its foreach ops' kernels work on this rank's shard, so the marker's
    # shape is the shard's (the whole tensor's was recorded, doubling the modelled bytes on two ranks), and the
    # whole tensor's is beside it
    import json
    import subprocess

    pytest.importorskip("torch.distributed.tensor")
    p = subprocess.run([sys.executable, "-c", DTENSOR_SCRIPT], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    marker = json.loads(json.loads(p.stdout.strip().splitlines()[-1]))
    items = marker["args"][0]["items"]
    assert [(i["shape"], i["global_shape"]) for i in items] == [([4, 8], [8, 8]), ([5, 8], [9, 8])]
