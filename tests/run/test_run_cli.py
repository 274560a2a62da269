"""pyprof run end to end on the CPU (the PyTorch profiler backend; CI has no GPU and no nsys): the script runs
unedited, warm-up steps are skipped and the asked steps captured, the records and the report are written, the
exit status is the script's, and Ctrl-C keeps what was captured."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the script needs torch (CI installs the CPU build)

SCRIPT = """
import sys, time, torch
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
steps, status = int(sys.argv[1]), int(sys.argv[2])
i = 0
while steps < 0 or i < steps:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    i += 1
    if i == 5:
        print("five steps", flush=True)
    if steps < 0:
        time.sleep(0.01)
sys.exit(status)
"""


def _steps_in(trace: Path) -> list[str]:
    events = json.loads(trace.read_text())["traceEvents"]
    return sorted(e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))


def test_the_asked_steps_after_warm_up_and_the_scripts_exit_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--warmup", "2",
                        "--steps", "3", "--", sys.executable, str(script), "8", "0"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    err = p.stderr
    assert p.returncode == 0, err
    # the steps are the script's optimizer steps: 2 skipped, then 3 recorded, one range each
    assert len(_steps_in(tmp_path / "out" / "trace.json")) == 3
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000
    assert (tmp_path / "out" / "records.dict").exists()
    # on a machine without a GPU: one line of what the report holds, and no next command that would print headers
    assert "no GPU activity was captured" in err and "the host's side alone" in err and "next:" not in err


def test_exit_status_is_the_scripts(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--steps", "2",
                        "--", sys.executable, str(script), "6", "3"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 3, p.stderr
    assert (tmp_path / "out" / "report.html").exists()


def test_ctrl_c_keeps_what_was_captured(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    # every step (--steps 0) of a script that never ends; Ctrl-C as a terminal sends it: to the group
    p = subprocess.Popen([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--steps",
                          "0", "--", sys.executable, str(script), "-1", "0"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout.readline().strip() == "five steps"
    os.killpg(p.pid, signal.SIGINT)
    _out, err = p.communicate(timeout=300)
    assert p.returncode != 0  # the script was interrupted: its status
    assert len(_steps_in(tmp_path / "out" / "trace.json")) >= 5 - 2  # five steps done when it says so, 2 of warm-up
    assert (tmp_path / "out" / "report.html").exists(), err


def test_usage_mistakes(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert p.returncode == 2 and p.stderr.strip() == \
        "pyprof run: error: give the command after --: pyprof run -- python train.py ARGS"
    env = {k: v for k, v in os.environ.items() if k != "NSYS"}
    env["PATH"] = os.path.dirname(sys.executable)  # no nsys there
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "--backend", "nsys", "--", "python", "x.py"],
                       cwd=tmp_path, capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "no nsys on the PATH" in p.stderr and p.stdout == ""


def test_a_script_killed_by_a_signal_exits_as_a_shell_says_it(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--",
                        sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 128 + signal.SIGTERM  # 143
    assert "nothing was captured" in p.stderr


INFERENCE = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
x = torch.randn(32, 64)
with torch.no_grad():
    for i in range(7):
        with torch.profiler.record_function("infer"):
            model(x)
"""


@pytest.mark.parametrize("name, marker", [("infer", "infer"), ("infer {i}", "infer *")], ids=["exact", "wildcard"])
def test_steps_by_the_scripts_own_ranges(tmp_path, name, marker):
    # an inference loop: no optimizer; its seven "infer" ranges (or "infer 0" ... "infer 6", named by a wildcard,
    # as prof's --step-marker matches) are the steps: 2 skipped, 3 recorded
    script = tmp_path / "infer.py"
    script.write_text(INFERENCE.replace('record_function("infer")', f'record_function(f"{name}")'))
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--warmup", "2",
                        "--steps", "3", "--step-marker", marker, "--", sys.executable, str(script)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    trace = tmp_path / "out" / "trace.json"
    assert len(_steps_in(trace)) == 3
    events = json.loads(trace.read_text())["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    theirs = {name.format(i=i) for i in range(7)}
    infers = [e for e in events if e.get("name") in theirs]
    # each recorded step holds one of the script's ranges, which the step range encloses
    assert len(infers) == 3
    for s in steps:
        assert sum(s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] for e in infers) == 1


def test_a_script_without_steps_is_told_how_to_mark_them(tmp_path):
    script = tmp_path / "infer.py"
    script.write_text(INFERENCE)
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--", sys.executable,
                        str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "no step was counted (no optimizer.step() ran)" in p.stderr and "--step-marker NAME" in p.stderr


@pytest.mark.parametrize("setting", [None, "3"])
def test_the_script_gets_the_users_blas_setting(tmp_path, setting):
    """pyprof keeps numpy's BLAS to one thread in its own process (common.one_blas_thread); the script it runs
    gets the environment as the user gave it."""
    script = tmp_path / "show.py"
    script.write_text("import os\nprint('BLAS setting:', os.environ.get('OPENBLAS_NUM_THREADS'))\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if setting is not None:
        env["OPENBLAS_NUM_THREADS"] = setting
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--",
                        sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert f"BLAS setting: {setting}\n" in p.stdout, p.stderr


def test_forward_steps_count_each_outermost_module_call(tmp_path):
    # the same loop without its ranges: --forward-steps makes each model(x) a step (the Sequential, not its three
    # layers): 7 forwards, 2 before the window, 3 recorded, each holding one forward's three layers' ops
    script = tmp_path / "infer.py"
    script.write_text(INFERENCE.replace('        with torch.profiler.record_function("infer"):\n            model(x)',
                                        "        model(x)"))
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--warmup", "2",
                        "--steps", "3", "--forward-steps", "--", sys.executable, str(script)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    trace = tmp_path / "out" / "trace.json"
    assert len(_steps_in(trace)) == 3
    timing = json.loads((tmp_path / "out" / "timing.json").read_text())
    assert "at each forward's end" in timing["how"]
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch",
                        "--forward-steps", "--step-marker", "infer", "--", sys.executable, str(script)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "give one way to count steps" in p.stderr


@pytest.mark.parametrize("missing", [False, True])
def test_a_script_that_fails_at_once_gets_no_empty_report(tmp_path, missing):
    # issue 44: a crashed (or missing) script used to get a report with nothing in it, and a traceback of pyprof's
    # own from the exit handler (newer torch raises AssertionError for a trace never started)
    script = tmp_path / "broken.py"
    if not missing:
        script.write_text("raise SystemExit('no data here')\n")
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "run", "-o", "out", "--backend", "torch", "--",
                        sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    status = 2 if missing else 1  # python's for a file it cannot open; SystemExit with a message
    assert p.returncode == status and ("can't open file" if missing else "no data here") in p.stderr
    assert f"nothing was captured: the script exited with status {status}" in p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr
    assert not (tmp_path / "out" / "report.html").exists() and not (tmp_path / "out" / "records.dict").exists()
