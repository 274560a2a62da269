"""Issue 41, item 1: ``pyprof.step()`` gives a script that calls ``pyprof.init()`` itself what ``pyprof run`` gives:
the capture window over its steps, a ``ProfilerStep#k`` range per captured step, and the program's own step times
(the steps before the window, nothing of the capture on) carried into the capture as a program mark, which parse
writes as the program line (tests/parse/test_program_mark.py). On the CPU build here: steps timed with
perf_counter (the CUDA path is the same code with events: tests/run/test_run_timing.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pyprof.common import UsageError
from pyprof.nvtx.timing import HOW_CPU
from pyprof.record import PROGRAM_MARK_PREFIX

torch = pytest.importorskip("torch")

# Eight steps of one torch.add and a 20 ms sleep; the window: 3 warm-up steps, 2 captured.
SCRIPT = """
import json, time, torch, pyprof
sink = pyprof.RecordingSink()
pyprof.init(sink=sink)
x = torch.ones(2)
for i in range(8):
    torch.add(x, x)
    time.sleep(0.02)
    pyprof.step(warmup=3, steps=2)
print(json.dumps(sink.events))
"""


def _events(tmp_path) -> list:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_window_marks_its_steps_only_and_ends_with_the_step_times(tmp_path):
    events = _events(tmp_path)
    texts = [e[1] if e[0] == "push" else "pop" for e in events]
    assert "\"op\":\"ones\"" in texts[0] and texts[1] == "pop"  # the input, made after init()
    add = next(t for t in texts if '"op":"add"' in t)
    # the 1st step ran under init() (called before the loop); 2 and 3 unmarked; 4 and 5 captured, each in its step
    # range; then the program mark, a zero-length range; 6-8 unmarked
    assert texts[2:-2] == [add, "pop", "ProfilerStep#0", add, "pop", "pop", "ProfilerStep#1", add, "pop", "pop"]
    mark, pop = texts[-2:]
    assert pop == "pop" and mark.startswith(PROGRAM_MARK_PREFIX)
    program = json.loads(mark)["program"]
    # the 1st step is not timed (no start); 2 and 3 are the unprofiled ones; 4 and 5 captured; each sleeps 20 ms
    assert len(program["unprofiled_step_ns"]) == 2 and len(program["captured_step_ns"]) == 2
    assert min(program["unprofiled_step_ns"] + program["captured_step_ns"]) >= 20_000_000
    assert program["how"] == HOW_CPU


def test_step_refuses_a_window_it_cannot_keep():
    from pyprof.nvtx import step_window as steps

    steps.reset()
    try:
        with pytest.raises(UsageError, match="0 or more"):
            steps.step(warmup=-1, steps=2)
        with pytest.raises(UsageError, match="at least 1"):
            steps.step(warmup=0, steps=2)
        steps.step()  # no window: nothing is on, nothing happens
        with pytest.raises(UsageError, match="differ from the first call"):
            steps.step(warmup=2, steps=1)
    finally:
        steps.reset()


# An inference loop: a model's forward, then a sampling op outside it, 8 times; forward_steps(warmup=3, steps=2).
FORWARDS = """
import json, time, torch, pyprof
sink = pyprof.RecordingSink()
pyprof.init(sink=sink, modules=True)
model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
x = torch.ones(1, 2)
pyprof.forward_steps(warmup=3, steps=2)
for i in range(8):
    y = model(x)
    time.sleep(0.02)
    torch.argmax(y)
print(json.dumps(sink.events))
"""


def test_forward_steps_make_each_outermost_module_call_a_step(tmp_path):
    from pyprof.nvtx.timing import _HOW_CPU

    script = tmp_path / "serve.py"
    script.write_text(FORWARDS)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    texts = [e[1] if e[0] == "push" else "pop" for e in json.loads(p.stdout)]
    steps = [t for t in texts if t.startswith("ProfilerStep#")]
    # a step ends where the outermost call (the Sequential, not its Linear or ReLU) returns: forwards 1-3 are the
    # warm-up, the window opens at the 3rd one's end; forwards 4 and 5 are captured, each step range holding the
    # sampling op after the previous forward and then its forward, whose module ranges close before the step's
    assert steps == ["ProfilerStep#0", "ProfilerStep#1"]
    first = texts.index("ProfilerStep#0")
    window = texts[first:texts.index("ProfilerStep#1")]
    assert '"op":"argmax"' in window[1] and window[3].startswith('{"pyprof":1,"module"')
    # every range pushed in it closed, the step's own last (just before the next step's push)
    assert window.count("pop") == sum(1 for t in window if t != "pop") and window[-1] == "pop"
    program = json.loads(texts[-2])["program"]
    assert program["how"] == _HOW_CPU.format(unit="forward") and "forward's end" in program["how"]
    # forwards 2 and 3 unprofiled, 4 and 5 captured: each period holds a 20 ms sleep
    assert len(program["unprofiled_step_ns"]) == 2 and len(program["captured_step_ns"]) == 2
    assert min(program["unprofiled_step_ns"] + program["captured_step_ns"]) >= 20_000_000


def test_forward_steps_refuse_a_window_they_cannot_keep():
    from pyprof.nvtx import step_window as steps

    steps.reset()
    try:
        with pytest.raises(UsageError, match="warmup must be 1 or more"):
            steps.forward_steps(warmup=0, steps=2)
        with pytest.raises(UsageError, match="warmup must be 1 or more"):
            steps.forward_steps(warmup=-1)
    finally:
        steps.reset()
