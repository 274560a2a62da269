"""Checks that need a CUDA GPU: run on the GPU machine with `python -m pytest tests/gpu` (CI has no GPU and
deselects them with -m "not gpu"; conftest.py marks this folder)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pyprof
from pyprof.nvtx import RecordingSink


def test_cuda_available():
    assert torch.cuda.is_available(), "tests/gpu must run on a machine with a CUDA GPU"


def test_init_turns_on_autograd_nvtx_and_user_emit_nvtx_is_harmless():
    sink = RecordingSink()
    pyprof.init(sink=sink)
    try:
        assert pyprof.nvtx.state.autograd_nvtx is not None
        with torch.autograd.profiler.emit_nvtx():  # would raise "already enabled" without pyprof's guard
            torch.relu(torch.randn(8, device="cuda"))
    finally:
        pyprof.uninit()
    # After uninit the user's own emit_nvtx works again, so the profiler mode was really released.
    with torch.autograd.profiler.emit_nvtx():
        torch.relu(torch.randn(8, device="cuda"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_training_step_identical_on_gpu(dtype):
    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                              nn.Linear(8 * 14 * 14, 10)).to("cuda", dtype)
        x = torch.randn(4, 3, 16, 16, device="cuda", dtype=dtype)
        torch.backends.cudnn.deterministic = True
        loss = F.cross_entropy(model(x).float(), torch.arange(4, device="cuda"))
        loss.backward()
        return [loss.detach()] + [p.grad for p in model.parameters()]

    bare = run()
    with pyprof.profiling(sink=RecordingSink()):
        wrapped = run()
    for a, b in zip(bare, wrapped, strict=True):
        assert torch.equal(a, b)


def test_a_nccl_process_under_init_exits_cleanly():
    # PyTorch's NVTX profiler mode left on when a process that ran an NCCL group exits crashed it (SIGSEGV after
    # "pure virtual method called", seen on 2 H200s, and with one process: exit status 139); init() turns the mode
    # off at exit. One process, a one-rank NCCL group: examples/ddp.py without torchrun.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "ddp.py", "--steps", "1", "--warmup", "1"], cwd=root / "examples",
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "capture=pyprof, ranks=1" in p.stdout


TIMM_SCRIPT = '''\
import timm
import torch
import torch.nn.functional as F

model = timm.create_model("resnet18", num_classes=100).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    images = torch.randn(32, 3, 128, 128, device="cuda")
    labels = torch.randint(0, 100, (32,), device="cuda")
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
'''


def test_pyprof_run_backends_agree_on_the_top_lines(tmp_path):
    # issue 44: the PyTorch profiler's frames named the `def forward` line; pyprof's ranges in its trace name the
    # calling line, as under Nsight Systems. A timm ResNet-18 (a model nobody here wrote) under both backends: the
    # lines that hold most GPU time are the same lines
    import json
    import shutil
    import subprocess
    import sys

    pytest.importorskip("timm")
    if shutil.which("nsys") is None and not __import__("os").environ.get("NSYS"):
        pytest.skip("no nsys on this machine")
    script = tmp_path / "train.py"
    script.write_text(TIMM_SCRIPT)
    top = {}
    for backend in ("torch", "nsys"):
        out = tmp_path / backend
        p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "--backend", backend, "--warmup", "2",
                            "--steps", "2", "-o", str(out), "--", sys.executable, str(script)],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-3000:]
        rows = subprocess.run([sys.executable, "-m", "pyprof.cli", "prof", "-q", "--group-by", "callsite", "--jsonl",
                               str(out / "records.dict")], capture_output=True, text=True, check=True).stdout
        lines = [json.loads(x) for x in rows.splitlines()]
        top[backend] = {r["key"].rsplit("/", 1)[-1] for r in lines[:5]}
        assert all("site-packages/timm" in r["key"] or "train.py" in r["key"] or r["key"] == "-" for r in lines)
    assert top["torch"] == top["nsys"], top
