"""torch.compile under pyprof.init(): every kernel Inductor generates gets a range naming its aten ops, shapes and the
user's lines (pyprof.nvtx.inductor). On the CPU, Inductor generates C++ kernels and calls extern GEMMs through the
same Python wrapper as on a GPU, so the ranges are the same; tests/parse/test_compiled.py reads real GPU captures."""
from __future__ import annotations

import inspect
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pyprof
from pyprof.nvtx import RecordingSink

DIM_IN, HIDDEN, BATCH = 64, 256, 32
# Inductor generates C++ kernels on the CPU and Triton kernels on a GPU, from the same wrapper (tests/gpu runs these)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(DIM_IN, HIDDEN)
        self.b = nn.Linear(HIDDEN, DIM_IN)

    def forward(self, x):
        h = F.gelu(self.a(x))  # line GELU
        return self.b(h) * 2  # line OUT


def _lines() -> tuple[str, str]:
    source, first = inspect.getsourcelines(Net.forward)
    at = {tag: first + i for i, text in enumerate(source) for tag in ("GELU", "OUT") if f"# line {tag}" in text}
    return f"{__file__}:{at['GELU']}", f"{__file__}:{at['OUT']}"


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled_markers(sink: RecordingSink) -> list[dict]:
    return [json.loads(e[1]) for e in sink.events if e[0] == "push" and e[1].startswith('{"pyprof"')
            and json.loads(e[1]).get("mod") == "inductor"]


def _train_step(net, x):
    out = net(x)
    out.sum().backward()
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_each_compiled_kernel_names_its_ops_shapes_and_lines(fresh_dynamo, device):
    torch.manual_seed(0)
    model, x = Net().to(device), torch.randn(BATCH, DIM_IN, device=device)
    sink = RecordingSink()
    pyprof.init(sink=sink)
    try:
        compiled = torch.compile(model)
        _train_step(compiled, x)
    finally:
        pyprof.uninit()
    gelu_line, out_line = _lines()
    kernels = _compiled_markers(sink)
    forward = [k for k in kernels if k["graph"] == "forward"]
    backward = [k for k in kernels if k["graph"] == "backward"]
    assert forward and backward
    # forward: the two Linear layers are extern GEMMs with the layers' shapes (x (BATCH, DIM_IN) times the transposed
    # weight, then the hidden state times the second's): addmm with the bias, or on a GPU mm with the bias added in a
    # generated kernel after it
    gemms = [k for k in forward if k["op"] in ("addmm", "mm")]
    operands = [[a["shape"] for a in k["args"] if a["type"] == "tensor"][-2:] for k in gemms]
    assert operands == [[[BATCH, DIM_IN], [DIM_IN, HIDDEN]], [[BATCH, HIDDEN], [HIDDEN, DIM_IN]]]
    assert [k["site"] for k in gemms] == [gelu_line, out_line]
    # the GELU is one generated kernel: it reads the first layer's output and writes its own, BATCH x HIDDEN elements
    # each (on a GPU the first layer's bias is added in it too: HIDDEN more elements read)
    (gelu,) = [k for k in forward if k["op"].startswith("fused:") and "gelu" in k["op"]]
    assert gelu["site"] == gelu_line and {"op": "gelu", "site": gelu_line} in gelu["fused"]
    moved = sorted((a["name"], a["shape"]) for a in gelu["args"] if a["name"] != "elementwise")
    assert moved in ([("in", [BATCH * HIDDEN]), ("out", [BATCH * HIDDEN])],
                     [("in", [HIDDEN]), ("in", [BATCH * HIDDEN]), ("out", [BATCH * HIDDEN])])
    # backward: three GEMMs (the second layer's input gradient, both weight gradients; the input x needs none)
    mms = [k for k in backward if k["op"] == "mm"]
    assert len(mms) == 3
    shapes = sorted(tuple(tuple(a["shape"]) for a in k["args"] if a["type"] == "tensor") for k in mms)
    assert shapes == sorted([((BATCH, DIM_IN), (DIM_IN, HIDDEN)), ((DIM_IN, BATCH), (BATCH, HIDDEN)),
                             ((HIDDEN, BATCH), (BATCH, DIM_IN))])
    # backward kernels keep the lines of the forward ops they differentiate (AOTAutograd copies the stack traces)
    assert {k["site"] for k in backward} == {gelu_line, out_line}
    assert all(k["graph_id"] == forward[0]["graph_id"] for k in kernels)
    # the ranges nest: each kernel's range closes before the next opens, and at the wrapper's return
    depth = 0
    for e in sink.events:
        depth += 1 if e[0] == "push" else -1
        assert depth >= 0
    assert depth == 0


def test_a_graph_of_torch_modules_takes_the_line_that_called_it(fresh_dynamo):
    model, x = nn.Sequential(nn.Linear(DIM_IN, HIDDEN), nn.GELU()), torch.randn(BATCH, DIM_IN)
    sink = RecordingSink()
    pyprof.init(sink=sink)
    try:
        compiled = torch.compile(model)
        compiled(x).sum().backward(); line = inspect.currentframe().f_lineno  # noqa: E702 - one line, two calls
    finally:
        pyprof.uninit()
    kernels = _compiled_markers(sink)
    assert kernels and {k["site"] for k in kernels} == {f"{__file__}:{line}"}


@pytest.mark.parametrize("device", DEVICES)
def test_pyprof_changes_neither_dynamo_nor_results(fresh_dynamo, device):
    from torch._dynamo.utils import counters

    def run(with_pyprof: bool):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model, x = Net().to(device), torch.randn(BATCH, DIM_IN, device=device)
        if with_pyprof:
            pyprof.init(sink=RecordingSink())
        try:
            compiled = torch.compile(model)
            outs = [_train_step(compiled, x).detach() for _ in range(3)]
        finally:
            pyprof.uninit()
        grads = [p.grad.clone() for p in model.parameters()]
        seen = (dict(counters["frames"]), counters["stats"].get("unique_graphs"), sum(counters["graph_break"].values()))
        return seen, outs, grads

    (plain, outs0, grads0), (traced, outs1, grads1) = run(False), run(True)
    assert plain == traced == ({"total": 1, "ok": 1}, 1, 0)
    # the same numbers, to rounding: a GPU's reductions and Triton's autotuning may order additions differently
    # from one compilation to the next, with pyprof or without
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(outs0 + grads0, outs1 + grads1))


def test_uninit_puts_inductor_back(fresh_dynamo):
    from torch._inductor import config, debug
    from torch._inductor.codegen import wrapper

    before = (config.fx_graph_cache, debug.set_kernel_post_grad_provenance_tracing,
              wrapper.PythonWrapperCodegen.write_provenance_debug_handle)
    pyprof.init(sink=RecordingSink())
    assert config.fx_graph_cache is False
    assert debug.set_kernel_post_grad_provenance_tracing is not before[1]
    pyprof.uninit()
    assert (config.fx_graph_cache, debug.set_kernel_post_grad_provenance_tracing,
            wrapper.PythonWrapperCodegen.write_provenance_debug_handle) == before


def test_the_pytorch_profiler_trace_carries_the_markers_as_valid_json(fresh_dynamo, tmp_path):
    # What `pyprof run --backend torch` does: compiled kernels only; the profiler writes range names into its JSON
    # without escaping quotes, so the marker goes in as a Python literal, which parse reads
    from pyprof.parse.attribute import markers

    model, x = Net(), torch.randn(BATCH, DIM_IN)
    pyprof.init(ops=False, modules=False, backward=False)
    try:
        compiled = torch.compile(model)
        _train_step(compiled, x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            _train_step(compiled, x)
    finally:
        pyprof.uninit()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("name", "").startswith("{'pyprof'")]
    decoded = [markers.decode(n) for n in names]
    assert decoded and all(m is not None and m.kind == markers.OP and m.mod == "inductor" for m in decoded)
    assert {m.op for m in decoded} >= {"addmm", "fused:gelu", "mm"}
    assert torch.add is torch._C._VariableFunctions.add  # ops=False: eager torch untouched


def test_a_fused_gather_reads_the_rows_it_gathers_not_the_table(fresh_dynamo):
    # An embedding lookup fused with what follows reads the ids and one row of WIDTH per id, not the whole table
    vocab, width, tokens = 32000, 256, 4 * 64
    table = nn.Embedding(vocab, width)
    ids = torch.randint(0, vocab, (4, 64))
    sink = RecordingSink()
    pyprof.init(sink=sink)
    try:
        torch.compile(lambda t: table(t).pow(2).sum())(ids)
    finally:
        pyprof.uninit()
    (kernel,) = [k for k in _compiled_markers(sink) if "embedding" in k["op"]]
    reads = sorted(a["shape"][0] for a in kernel["args"] if a["name"] == "in")
    assert reads == [tokens, tokens * width]  # the ids, and one row per id


def _fresh_process(code: str) -> str:
    """The stdout of ``code`` run in a Python of its own (torch and Dynamo imported there first); fails with its
    stderr's end when it fails."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_init_loads_no_inductor_and_names_kernels_once_it_loads():
    # Inductor takes about a second to import: init() waits for torch.compile to load it (a fresh process)
    code = (
        "import sys, json, torch\n"
        "import pyprof\n"
        "from pyprof.nvtx import RecordingSink\n"
        "sink = RecordingSink()\n"
        "pyprof.init(sink=sink)\n"
        "assert 'torch._inductor.codegen.wrapper' not in sys.modules\n"
        "f = torch.compile(lambda x: torch.nn.functional.gelu(x @ x))\n"
        "f(torch.randn(8, 8))\n"
        "ops = [json.loads(e[1])['op'] for e in sink.events if e[0] == 'push' and '\"inductor\"' in e[1]]\n"
        "print(sorted(set(ops)))\n")
    assert _fresh_process(code).strip() == "['fused:gelu', 'mm']"


def test_dynamo_first_loaded_after_init_traces_through_the_wrappers():
    # Dynamo builds its table of torch's functions by name the first time it is imported: after init(), names like
    # torch.conv2d are pyprof's wrappers. Found on the H100 (PyTorch 2.11): torch.compile(mode="reduce-overhead")
    # of a timm ViT broke its graph at every conv2d and its CUDA graphs failed. A fresh process, Dynamo imported
    # after init(): one graph, no break (it was 2 graphs and a break before the wrappers named their function).
    code = (
        "import sys, torch, pyprof\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "pyprof.init(sink=pyprof.RecordingSink())\n"
        "import torch._dynamo\n"
        "m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),\n"
        "                        torch.nn.Linear(8 * 6 * 6, 4))\n"
        "e = torch._dynamo.explain(m)(torch.randn(2, 3, 8, 8))\n"
        "print(e.graph_count, e.graph_break_count)\n")
    assert _fresh_process(code).split() == ["1", "0"]


def test_forward_steps_under_a_compiled_call_count_steps_and_compile_only_the_model():
    # transformers' generate() with a static cache compiles model.__call__ (reduce-overhead). Found on the H100
    # (PyTorch 2.11): with every frame pyprof.forward_steps' wrapper calls left to Dynamo, the window's start
    # (init() patching torch) was traced and failed ("InternalTorchDynamoError ... update_wrapper"); with none of
    # them compiled, the model ran eagerly (4.7 ms a token against 1.3). Now the model's forward is compiled and the
    # step's end runs as it is: 2 steps, and no frame of pyprof's compiled (85 frames before, here on the CPU).
    code = (
        "import json, torch\n"
        "from torch._dynamo.utils import counters\n"
        "import pyprof\n"
        "sink = pyprof.RecordingSink()\n"
        "pyprof.init(sink=sink, backward=False)\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.a = torch.nn.Linear(8, 8); self.b = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        return self.b(torch.relu(self.a(x)))\n"
        "m = M()\n"
        "pyprof.forward_steps(warmup=2, steps=2)\n"
        "call = torch.compile(m.__call__)\n"
        "x = torch.randn(2, 8)\n"
        "for _ in range(6):\n"
        "    call(x)\n"
        "steps = [e[1] for e in sink.events if e[0] == 'push' and e[1].startswith('ProfilerStep#')]\n"
        "print(json.dumps([steps, counters['stats']['unique_graphs'], counters['frames']['total']]))\n")
    steps, graphs, frames = json.loads(_fresh_process(code).strip().splitlines()[-1])
    assert steps == ["ProfilerStep#0", "ProfilerStep#1"]
    # the model's forward, compiled once with the markers off and once on (pyprof's wrappers change its guards)
    assert graphs >= 1 and frames <= 2 * graphs
