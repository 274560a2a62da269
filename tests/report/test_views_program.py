"""Issue 41: the program's own step (parse's program line, written by pyprof run) beside the captured one. The
overview and the headline state the inflation; the idle rules judge the program's idle time, not the capture's,
and their savings stay within the program's own steps; without a program line they say once that their idle
figures include the capture's own cost."""
from __future__ import annotations

import json

import pytest
from report_helpers import kernel

from pyprof.common import InputError
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.views import build
from pyprof.record import end_line, program_line
from pyprof.report.headline import headline

# 100 kernels of 20 us, each 10 us after the previous one ended, launched after the GPU went idle (kernel():
# launched 1 us before it starts): one step ("all", no step marker) from 10 us to the last one's end at
# 10 + 99 x 30 + 20 = 3000 us, a span of 2990 us; busy 100 x 20 = 2000 us; idle 99 x 10 = 990 us (33.1%).
RECS = [kernel(10_000 + i * 30_000, 20_000, callsite="/x/train.py:70") for i in range(100)]
SPAN_NS, BUSY_NS, IDLE_NS = 2_990_000, 2_000_000, 990_000
# The program's own steps: median 2.4 ms unprofiled; captured steps timed the same way, median 3.0 ms.
UNPROFILED = [2_390_000, 2_400_000, 2_410_000]
CAPTURED = [2_990_000, 3_010_000]


def _agg(tmp_path, unprofiled=None, captured=(), name="x.dict"):
    """The aggregate of RECS written as parse writes them, with a program line before the end line."""
    lines = [json.dumps(r) for r in RECS]
    if unprofiled is not None:
        lines.append(program_line(1, list(unprofiled), list(captured), "cuda events (built)"))
    lines.append(end_line(len(RECS)))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return aggregate_files([str(path)])


def _rules(agg):
    (t,) = build(agg, ["recommendations"])
    return {r[0]: dict(zip(t.columns, r)) for r in t.rows}, t.notes


def test_the_trace_alone_fires_launch_bound_and_says_its_figures_include_the_capture(tmp_path):
    rules, notes = _rules(_agg(tmp_path))
    row = rules["launch_bound"]
    # the capture's idle time as it is: 99 x 10 us = 0.99 ms, 33.1% of the 2.99 ms span
    assert row["saving_ms"] == 0.99 and "0.990 ms (33.1% of the profiled span)" in row["evidence"]
    assert "without it" not in row["evidence"]
    said = [n for n in notes if "include its own cost, unmeasured" in n]
    assert len(said) == 1 and said[0].startswith("data_loading, idle_gaps, launch_bound, sync_copies:")
    (ov, idle) = build(_agg(tmp_path), ["overview", "idle"])
    assert not any("Program step" in n for n in ov.notes)
    assert not any("program's own idle" in n for n in idle.notes)  # nothing measured: nothing said of it
    h = headline(_agg(tmp_path), [], 0)
    assert (h.program_step_ms, h.captured_step_ms, h.inflation) == (None, None, None)


def test_a_program_line_turns_the_idle_into_the_programs_and_caps_the_saving(tmp_path):
    agg = _agg(tmp_path, UNPROFILED, CAPTURED)
    rules, notes = _rules(agg)
    row = rules["launch_bound"]
    # the program's idle per step: 2.4 - 2.0 = 0.4 ms; the capture's 0.99 ms; factor 0.4 / 0.99 = 0.40404; the
    # gaps' 0.99 ms x 0.40404 = 0.4 ms, 16.7% of the program's one step of 2.4 ms (>= 10%: fires), and never more
    # than that step's idle (0.4 ms) nor its step (2.4 ms)
    assert row["saving_ms"] == pytest.approx(0.4, abs=1e-4) and row["saving_ms"] <= 2.4
    assert "0.990 ms (33.1% of the profiled span) in the capture, 0.400 ms without it (16.7% of the program's " \
           "own steps)" in row["evidence"]
    assert row["saving_pct"] == pytest.approx(16.67, abs=0.01)  # of the program's 2.4 ms, not the captured 2.99
    assert not any("unmeasured" in n for n in notes)
    assert any("x 0.404 = min(1, the program's idle per step 0.400 ms" in n and "unprofiled step 2.400 ms, 3 steps" in n
               for n in notes)
    (ov,) = build(agg, ["overview"])
    (note,) = [n for n in ov.notes if "Program step" in n]
    # captured: the median of 2.99 and 3.01 ms = 3.0 ms; 3.0 / 2.4 = 1.25
    assert "Program step 2.4 ms unprofiled (median of 3 steps" in note and "captured 3.0 ms" in note
    assert "inflated the step 1.25x" in note and "2.4 - 2.0 = 0.4 ms, where the capture shows 0.99 ms" in note
    h = headline(agg, [], 0)
    assert (h.program_step_ms, h.captured_step_ms, h.inflation) == (2.4, 3.0, 1.25)
    # the idle view beside its rows: the program's 0.4 ms of idle in its one step (0.4 / 2.4 = 16.67%) against the
    # capture's 0.99 ms, 0.40 of it the program's (0.4 / 0.99)
    (idle,) = build(agg, ["idle"])
    (note,) = [n for n in idle.notes if "program's own idle" in n]
    assert note.startswith("The program's own idle: 0.4 ms over its step (16.67% of its 2.4 ms step, unprofiled), "
                           "where the capture shows 0.99 ms") and "0.40 of their time the program's" in note


def test_a_program_whose_idle_is_small_is_not_launch_bound(tmp_path):
    # 2.15 ms unprofiled: 0.15 ms idle, 7.0% of its step (< 10%): no launch_bound, where the capture said 33.1%
    rules, notes = _rules(_agg(tmp_path, [2_150_000]))
    assert "launch_bound" not in rules and not any("unmeasured" in n for n in notes)
    # busy over the unprofiled step (the capture slowed the GPU too): no idle is left to the program
    rules, _ = _rules(_agg(tmp_path, [1_900_000], name="y.dict"))
    assert "launch_bound" not in rules


def test_without_captured_times_the_traces_mean_step_is_the_captured_one(tmp_path):
    (ov,) = build(_agg(tmp_path, UNPROFILED), ["overview"])
    (note,) = [n for n in ov.notes if "Program step" in n]
    # the trace's one step: 2.99 ms; 2.99 / 2.4 = 1.2458
    assert "captured 2.99 ms (the mean span above)" in note and "inflated the step 1.25x" in note


def test_a_damaged_program_line_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "bad.dict"
    path.write_text(json.dumps(RECS[0]) + "\n" + program_line(1, [0], [], "x") + "\n" + end_line(1) + "\n")
    with pytest.raises(InputError, match="line 2: a damaged program line"):
        aggregate_files([str(path)])
