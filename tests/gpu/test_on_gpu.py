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
