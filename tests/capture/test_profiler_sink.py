"""Issue 44: ``pyprof run --backend torch`` gave forward ops the ``def forward`` line and backward ops the line the
script was on when the profiler started: the PyTorch profiler names a Python frame by its function's first line
(or, for frames open at its start, the line they were on then). pyprof's op ranges go into its trace as
record_function ranges (emit.ProfilerSink) naming the calling line, and a backward kernel takes its forward op's
line, as under Nsight Systems.

The capture runs on the CPU here: the trace then has no GPU, so each innermost aten op is given one kernel, launched
from inside it, as a GPU run would (``_with_kernels``). The expected lines are found in the script's own text."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from parse_output import records_of

from pyprof.parse import parse_file
from pyprof.record import read_lines

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''\
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = F.max_pool2d(x, 2)
        return self.fc(x.flatten(1))


def main(with_pyprof, path):
    if with_pyprof:
        import pyprof

        pyprof.init(modules=False, backward=False, sink=pyprof.ProfilerSink())  # what pyprof run --backend torch does
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                with_stack=True, with_modules=True) as prof:
        for _ in range(2):
            x = torch.randn(4, 3, 14, 14)
            loss = F.cross_entropy(net(x), torch.randint(0, 10, (4,)))
            loss.backward()
            opt.step()
            opt.zero_grad()
    prof.export_chrome_trace(path)


main(sys.argv[1] == "1", sys.argv[2])
'''


def _with_kernels(trace: Path) -> Path:
    """The trace with one kernel per innermost aten op: a cudaLaunchKernel call in the op's middle, and the kernel."""
    d = json.loads(trace.read_text())
    events = d["traceEvents"]
    ops: dict = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X" and e["name"].startswith("aten::"):
            ops.setdefault(e["tid"], []).append(e)
    corr = 0
    for es in ops.values():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        for i, e in enumerate(es):
            end = e["ts"] + e["dur"]
            if any(e["ts"] <= o["ts"] and o["ts"] + o["dur"] <= end for o in es[i + 1:] if o["ts"] <= end):
                continue  # an aten op inside it launches instead
            corr += 1
            t = e["ts"] + e["dur"] / 2
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": e["pid"],
                           "tid": e["tid"], "ts": t, "dur": 0.001, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": "k_" + e["name"][6:], "pid": 0, "tid": 7, "ts": t + 5,
                           "dur": 1, "args": {"correlation": corr, "device": 0, "stream": 7}})
    out = trace.with_name(trace.stem + "_gpu.json")
    out.write_text(json.dumps(d))
    return out


def _records(tmp_path: Path, with_pyprof: bool) -> tuple[list[dict], Path]:
    script = tmp_path / "cnn.py"
    script.write_text(SCRIPT)
    trace = tmp_path / f"trace_{int(with_pyprof)}.json"
    p = subprocess.run([sys.executable, str(script), "1" if with_pyprof else "0", str(trace)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    out = io.StringIO()
    parse_file(str(_with_kernels(trace)), out)
    return list(read_lines(records_of(out.getvalue().splitlines()))), script


def _line_of(script: Path, text: str) -> int:
    (n,) = [i for i, line in enumerate(script.read_text().splitlines(), 1) if text in line]
    return n


def _line(d: dict) -> int | None:
    site = d.get("callsite") or (d.get("fwd") or {}).get("callsite")
    return int(site.rsplit(":", 1)[1]) if site and "cnn.py" in site else None


def test_with_pyprofs_ranges_every_kernel_has_its_calling_line(tmp_path):
    recs, script = _records(tmp_path, True)
    conv, pool, fc = (_line_of(script, t) for t in ("self.conv(x)", "max_pool2d", "self.fc("))
    loss, step = _line_of(script, "F.cross_entropy"), _line_of(script, "opt.step()")
    by_op: dict = {}
    for d in recs:
        by_op.setdefault((d["op"][0] if d["op"] else None, d["dir"]), set()).add(_line(d))
    # forward ops at the line that called them, not at `def forward`
    assert by_op[("conv2d", "fprop")] == by_op[("relu", "fprop")] == {conv}
    assert by_op[("max_pool2d", "fprop")] == {pool} and by_op[("linear", "fprop")] == {fc}
    assert by_op[("cross_entropy", "fprop")] == {loss}
    # backward kernels at their forward op's line, not where main() was when the profiler started
    bprop_lines = {_line(d) for d in recs if d["dir"] == "bprop" and d.get("fwd")}
    assert bprop_lines == {conv, pool, fc, loss}
    assert {_line(d) for d in recs if d["op"] and d["op"][0].startswith("_foreach") or "sgd" in str(d["op"])} <= \
        {step, None}
    # no kernel at the `def` lines, nor in pyprof's own files
    defs = {_line_of(script, "def forward"), _line_of(script, "def main")}
    assert not {_line(d) for d in recs} & defs
    assert not any("pyprof/" in (d.get("callsite") or "") for d in recs)


def test_without_them_the_profilers_own_frames_name_the_def_line(tmp_path):
    # the PyTorch profiler alone: what the issue saw, and why pyprof run puts its own ranges in
    recs, script = _records(tmp_path, False)
    lines = {_line(d) for d in recs if d["dir"] == "fprop" and d["op"] and d["op"][0].startswith("conv")}
    assert lines == {_line_of(script, "def forward")}
