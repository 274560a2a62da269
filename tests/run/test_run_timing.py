"""Issue 41: pyprof run times the program's own steps around the capture and carries them into the records (the
program line). On the CPU (torch's CPU build: perf_counter, said in the line's ``how``); the CUDA event path is
the same code with events for timestamps (pyprof.nvtx.timing), checked here with a fake torch."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from pyprof.run.cli import BOOT
from pyprof.nvtx.timing import HOW_CPU, HOW_CUDA, StepTimer

torch = pytest.importorskip("torch")

# Twelve optimizer steps, each with a 20 ms sleep after it (the step the host takes: perf_counter's time).
SCRIPT = """
import sys, time, torch
import pyprof.nvtx as capture
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
marking = []
for i in range(12):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    marking.append(capture.state.emitter is not None)
    time.sleep(0.02)
print(marking, file=sys.stderr)
"""


def _program(records) -> list[dict]:
    return [json.loads(x) for x in records.read_text().splitlines() if x.startswith('{"pyprof_side":"program"')]


def test_the_steps_around_the_capture_reach_the_records(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--warmup", "4",
                        "--steps", "3", "--", sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (line,) = _program(tmp_path / "out" / "records.dict")
    # 12 steps: the 1st is not timed (no start); 2, 3 wait (unprofiled); the 4th is the profiler's warm-up
    # (skipped); 5, 6, 7 captured; the 8th pays for ending the capture (skipped); 9-12 unprofiled: 2 + 4 = 6
    # unprofiled, 3 captured
    assert len(line["unprofiled_step_ns"]) == 6 and len(line["captured_step_ns"]) == 3
    assert line["how"] == HOW_CPU and line["how"].startswith("perf_counter")
    # each step sleeps 20 ms after its optimizer step: no step is shorter
    assert min(line["unprofiled_step_ns"] + line["captured_step_ns"]) >= 20_000_000
    # pyprof's markers (its emitter) are on only where the profiler records: the profiler's warm-up step (4th, on
    # at the end of the 3rd, in its optimizer step) and the captured 5-7; off once the capture is exported, at the
    # end of the 7th (in its optimizer step too)
    seen = next(x for x in p.stderr.splitlines() if x.startswith("[False") or x.startswith("[True"))
    assert seen == str([False, False, True, True, True, True, False, False, False, False, False, False])


def test_code_compiled_before_the_capture_is_not_compiled_again_after_it(monkeypatch):
    # a Llama's decode step, compiled during warm-up, compiled again after the capture (H100, TORCH_LOGS=recompiles:
    # "___check_type_id(... torch.cat ...)"): torch.cat was the wrapper when compiled, torch's builtin after. Here a
    # function compiled under the installed-off wrappers, run before, during and after a capture: one graph, and
    # nothing compiled after the capture
    monkeypatch.delenv("PYPROF_RUN_BACKEND", raising=False)
    import pyprof
    from torch._dynamo.utils import counters

    steps = _boot_module()._Steps("nsys", 2, 3, "unused")
    torch._dynamo.reset()
    counters.clear()  # (counted since the process began: other tests compile too)
    try:
        steps._install()
        compiled = torch.compile(lambda x: torch.cat((x, x), dim=-1) * 2, backend="eager")
        x = torch.randn(2, 3)
        compiled(x)
        steps._markers(True)
        compiled(x)
        steps._markers(False)
        compiled(x)
        assert counters["stats"]["unique_graphs"] == 1 and not counters["recompiles"]
    finally:
        pyprof.uninit()
        torch._dynamo.reset()


def _boot_module():
    """The boot module as a module object, without running its boot (no PYPROF_RUN_BACKEND in the test's
    environment: _boot returns at once)."""
    spec = importlib.util.spec_from_file_location("pyprof_boot_under_test", BOOT / "sitecustomize.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_nsys_markers_are_installed_off_then_on_for_the_capture_only(monkeypatch):
    monkeypatch.delenv("PYPROF_RUN_BACKEND", raising=False)
    import pyprof
    from pyprof import nvtx

    steps = _boot_module()._Steps("nsys", 2, 3, "unused")
    original = torch.nn.functional.linear
    try:
        steps._install()
        held = torch.nn.functional.linear  # what a script imports after the boot: the wrapper
        assert getattr(held, "__pyprof_wrapped__", None) is original and nvtx.state.emitter is None
        steps._markers(True)
        assert nvtx.state.emitter is not None  # the wrapper the script holds marks again
        steps._markers(False)  # installed and off again, as before (not torch's own: compiled code guards on types)
        assert torch.nn.functional.linear is not original and nvtx.state.emitter is None
        assert getattr(torch.nn.functional.linear, "__pyprof_wrapped__", None) is original
        x = torch.randn(2, 3)
        assert torch.equal(held(x, torch.eye(3)), x)  # and calls straight through
    finally:
        pyprof.uninit()
    # the phases: 2 warm-up steps (the 1st untimed), 3 captured, the 6th after it skipped, the rest unprofiled
    from pyprof.nvtx.step_window import Window

    window = Window(torch, 2, 3, lambda on: None)
    phases = []
    for n in range(1, 9):
        window.done = n
        phases.append(window.phase())
    assert phases == ["unprofiled", "unprofiled", "captured", "captured", "captured", "skipped", "unprofiled",
                      "unprofiled"]


class _Event:
    """A CUDA event of a fake torch: records the fake clock; elapsed_time in ms, as torch.cuda.Event's."""

    clock_ms = 0.0

    def __init__(self, enable_timing):
        assert enable_timing

    def record(self):
        self.at = _Event.clock_ms

    def elapsed_time(self, other):
        return other.at - self.at


class _FakeCuda:
    Event = _Event
    synced = 0

    @staticmethod
    def is_available():
        return True

    @classmethod
    def synchronize(cls):
        cls.synced += 1


class _FakeTorch:
    cuda = _FakeCuda


def test_cuda_events_time_each_step_from_the_previous_ones_end():
    t = StepTimer(_FakeTorch)
    # step ends at 0 (the first step: no start), 30, 55, 90 ms
    for at, phase in ((0.0, "unprofiled"), (30.0, "unprofiled"), (55.0, "captured"), (90.0, "unprofiled")):
        _Event.clock_ms = at
        t.boundary(phase)
    # 30 - 0 = 30 ms and 90 - 55 = 35 ms unprofiled, 55 - 30 = 25 ms captured; one synchronize before reading
    assert t.program() == {"unprofiled_step_ns": [30_000_000, 35_000_000], "captured_step_ns": [25_000_000],
                           "how": HOW_CUDA}
    assert _FakeCuda.synced == 1 and HOW_CUDA.startswith("cuda events")


def test_nsys_steps_open_a_range_per_captured_step_and_start_and_stop_the_capture():
    """The nsys window (pyprof.nvtx.step_window.Window, which pyprof run's boot and pyprof.step() drive) end to end, with
    a fake torch.cuda (no GPU here): a run on the GPU machine once found the capture's start calling a step-range
    method that was gone. warmup 2, steps 3: the profiler starts after the 2nd step, ProfilerStep#0..2 open one
    after another, the capture stops after the 5th."""
    import types

    from pyprof.nvtx.step_window import Window

    calls = []
    cuda = types.SimpleNamespace(
        is_available=lambda: True, synchronize=lambda: None, Event=_Event,
        profiler=types.SimpleNamespace(start=lambda: calls.append("start"), stop=lambda: calls.append("stop")),
        nvtx=types.SimpleNamespace(range_push=lambda name: calls.append(f"push {name}"),
                                   range_pop=lambda: calls.append("pop")))
    window = Window(types.SimpleNamespace(cuda=cuda), 2, 3, lambda on: calls.append(f"markers {on}"))
    window.start()
    for _ in range(7):
        window.boundary()
    assert calls == ["markers False", "markers True", "start", "push ProfilerStep#0", "pop", "push ProfilerStep#1",
                     "pop", "push ProfilerStep#2", "pop", "stop", "markers False"]
    # 7 boundaries: the 1st starts the clock; 2nd unprofiled, 3-5 captured, 6th skipped, 7th unprofiled
    assert [len(v) for v in window.timer.results_ns().values()] == [2, 3, 1]
