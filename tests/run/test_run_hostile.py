"""pyprof run against what it runs (issue 40): names from the capture reach the terminal escaped (reproducer 14),
a capture that parse refuses leaves no records.dict, and the script's interpreter gets the pyprof package alone,
never the folder it is installed in. Each script here writes its capture itself; a stub ``torch`` that fails to
import keeps the boot module from starting a real profiler (fast, and no torch needed)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pyprof.run.cli import BOOT, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_torch(tmp_path, monkeypatch):
    """The script's PYTHONPATH (the user's, which run keeps after its own): a torch that cannot be imported."""
    stub = tmp_path / "stub"
    (stub / "torch").mkdir(parents=True)
    (stub / "torch" / "__init__.py").write_text("raise ImportError('a stub torch')\n")
    monkeypatch.setenv("PYTHONPATH", str(stub))
    monkeypatch.chdir(tmp_path)
    return stub


def _writes_trace(text: str) -> list[str]:
    return [sys.executable, "-c", f"import os; open(os.environ['PYPROF_RUN_TRACE'], 'w').write({text!r})"]


def test_capture_names_reach_the_terminal_escaped(shared, no_torch, capfd):
    src = shared / "corpus" / "fuzz-repros-2026-12" / "14-ansi-run-trace.json"
    rc = main(["--backend", "torch", "-o", "out", "--", sys.executable, "-c",
               f"import os, shutil; shutil.copy({str(src)!r}, os.environ['PYPROF_RUN_TRACE'])"])
    err = capfd.readouterr().err
    assert rc == 0, err
    assert "\x1b" not in err and "\x07" not in err  # no escape sequence (title, clear screen, colour) goes out
    # README of the reproducer: the op is renamed conv2d<ESC>]0;PWNED<BEL><ESC>[2J<ESC>[31m<newline>FORGED LINE
    assert "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31m\\nFORGED LINE" in err
    assert not [line for line in err.splitlines() if line.startswith("FORGED")]


def test_the_headline_without_a_saving_says_so(shared, no_torch, capfd):
    """The reproducer's one finding has no roofline, so no saving: said, not printed as None."""
    src = shared / "corpus" / "fuzz-repros-2026-12" / "14-ansi-run-trace.json"
    main(["--backend", "torch", "-o", "out", "--", sys.executable, "-c",
          f"import os, shutil; shutil.copy({str(src)!r}, os.environ['PYPROF_RUN_TRACE'])"])
    err = capfd.readouterr().err
    findings = [line for line in err.splitlines() if line.startswith("pyprof run: finding: ")]
    assert findings and all("None" not in line for line in findings), findings
    assert any(line.endswith("(saving not estimated)") for line in findings), findings


def test_a_refused_capture_leaves_no_records(no_torch, tmp_path, capfd):
    (tmp_path / "out").mkdir()
    rc = main(["--backend", "torch", "-o", "out", "--", *_writes_trace("{")])
    err = capfd.readouterr().err
    assert rc == 1
    refusals = [line for line in err.splitlines() if "error" in line]
    assert refusals == [refusals[0]] and refusals[0].startswith("pyprof run: error: out/trace.json: "), err
    # the capture stays (the file the message names); nothing of run's own
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["trace.json"]


def test_without_torch_the_script_runs_and_one_line_says_why(no_torch, capfd):
    rc = main(["--backend", "torch", "-o", "out", "--", sys.executable, "-c", "print('ran')"])
    out, err = capfd.readouterr()
    assert rc == 1  # nothing captured
    assert "ran" in out
    assert "Traceback" not in err and "Error in sitecustomize" not in err
    assert f"pyprof run: nothing to capture in {sys.executable}: a stub torch" in err


def test_the_script_gets_the_pyprof_package_alone(no_torch, tmp_path, capfd):
    probe = tmp_path / "probe.json"
    script = ("import importlib.util, json, os, pyprof; json.dump({'path': os.environ['PYTHONPATH'], "
              "'pyprof': pyprof.__file__, 'bench': importlib.util.find_spec('bench') is not None, "
              "'packages': json.loads(os.environ['PYPROF_RUN_PACKAGES'])}, "
              f"open({str(probe)!r}, 'w'))")
    main(["--backend", "torch", "-o", "out", "--", sys.executable, "-c", script])
    capfd.readouterr()
    seen = json.loads(probe.read_text())
    # the boot folder, then the user's own PYTHONPATH: not the folder above the pyprof package
    assert seen["path"] == os.pathsep.join([str(BOOT), str(no_torch)])
    assert seen["pyprof"] == str(ROOT / "pyprof" / "__init__.py")
    # bench/ lies beside pyprof/ in this checkout (as numpy beside pyprof in a site-packages): out of reach
    assert not seen["bench"]
    # the capture's two packages besides torch, each where this interpreter finds it
    import nvtx

    assert seen["packages"] == {"pyprof": str(ROOT), "nvtx": str(Path(nvtx.__file__).resolve().parents[1])}


def test_another_interpreter_gets_pyprof_and_nvtx_from_pyprofs_environment(no_torch, tmp_path, capfd):
    """A script run by an interpreter of another environment, which has neither package: the capture's two
    come from pyprof's environment, and nothing else of it (numpy lies beside nvtx in the venv)."""
    import shutil
    import subprocess

    other = shutil.which("python3", path="/usr/bin:/usr/local/bin:" + os.path.expanduser("~/.pyenv/shims"))
    lacks = "import importlib.util as u; print(all(u.find_spec(n) is None for n in ('nvtx', 'pyprof', 'numpy')))"
    if other is None or subprocess.run([other, "-c", lacks], capture_output=True, text=True,
                                       env={"PATH": os.environ.get("PATH", "")}).stdout.strip() != "True":
        pytest.skip("no python3 outside pyprof's environment without nvtx, pyprof and numpy")
    probe = tmp_path / "probe.json"
    script = ("import importlib.util, json, nvtx, pyprof; json.dump({'nvtx': nvtx.__file__, 'pyprof': "
              f"pyprof.__file__, 'numpy': importlib.util.find_spec('numpy') is not None}}, open({str(probe)!r}, 'w'))")
    main(["--backend", "torch", "-o", "out", "--", other, "-c", script])
    capfd.readouterr()
    import nvtx

    seen = json.loads(probe.read_text())
    assert seen == {"nvtx": nvtx.__file__, "pyprof": str(ROOT / "pyprof" / "__init__.py"), "numpy": False}


def _headline_lines(capsys, **over) -> list[str]:
    from pyprof.report.headline import Entry, Headline
    from pyprof.run.cli import _headline

    h = Headline(step_ms=12.5, steps=3, gpu_busy_pct=80.0, gpu_ms=30.0, activities=10, modelled_pct=None,
                 flops_pct=None, top_ops=[Entry("aten::mm", 20.0, 66.7)],
                 findings=[Entry("low_occupancy: kernels k (0%)", 1.0, 3.3, None, 0.5)])
    for k, v in over.items():
        setattr(h, k, v)
    _headline(h)
    return capsys.readouterr().err.splitlines()


def test_the_headline_says_its_numbers_and_a_saving_when_measured(capsys):
    assert _headline_lines(capsys) == [
        "pyprof run: step 12.5 ms (3 steps), GPU busy 80.0%, 10 GPU activities; top ops: aten::mm 66.7%",
        "pyprof run: the program's own step was not measured: the step and the findings' idle figures include the "
        "capture's own cost",
        "pyprof run: finding: low_occupancy: kernels k (0%) (saves up to 0.5 ms)"]


def test_the_headline_sets_the_programs_own_step_beside_the_captured_one(capsys):
    # 12.5 ms captured (timed the same way) against 10 ms unprofiled: 12.5 / 10 = 1.25
    lines = _headline_lines(capsys, program_step_ms=10.0, captured_step_ms=12.5, inflation=1.25, findings=[])
    assert lines[1] == ("pyprof run: the program's own step 10.0 ms unprofiled, captured 12.5 ms: the capture "
                        "inflated the step 1.25x; the findings' idle figures are the program's")


def test_the_headline_says_na_where_the_report_measured_nothing(capsys):
    """No step windows (step_ms, busy None): 'na', never 'None ms'."""
    lines = _headline_lines(capsys, step_ms=None, steps=0, gpu_busy_pct=None, findings=[])
    assert lines == ["pyprof run: step na (0 steps), GPU busy na, 10 GPU activities; top ops: aten::mm 66.7%"]
