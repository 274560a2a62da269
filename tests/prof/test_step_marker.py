"""Issue 43 (inference as it runs): ``--step-marker NAME`` makes a step of each range so named in any records, for
traces whose loop has no ProfilerStep ranges (a serving engine's profiler writes none). Instances of a name are
told apart by their push times (``range_ns``)."""
from __future__ import annotations

import contextlib
import gzip
import io
import json

import pytest
from shared_files import EXTERNAL, require_shared

from pyprof.common import UsageError
from pyprof.parse import parse_file
from pyprof.prof import aggregate_jobs
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.aggregate_jobs import aggregate_file_jobs
from pyprof.prof.cli import main
from pyprof.prof.step_marker import StepMarker
from pyprof.prof.views import build


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    require_shared()
    out = {}
    for name in ("hta_trace_diff_test.json.gz", "hta_critical_path_alexnet.json.gz"):
        path = tmp_path_factory.mktemp("sm") / (name + ".dict")
        with open(path, "w") as f:
            parse_file(str(EXTERNAL / name), f)
        out[name] = str(path)
    return out


def _overview(agg):
    (t,) = build(agg, ["overview"])
    return t


def test_profiler_step_ranges_named_as_a_marker_give_the_same_steps(records, monkeypatch):
    # HTA's trace_diff test trace has six ProfilerStep#N ranges: found by their number (the default) or as ranges
    # the marker names (by their push times), every step's figures are the same
    path = records["hta_trace_diff_test.json.gz"]
    default = _overview(aggregate_files([path]))
    marker = StepMarker("ProfilerStep#*")
    marked = _overview(aggregate_files([path], marker=marker))
    assert [r[0] for r in default.rows] == [f"ProfilerStep#{n}" for n in range(1009, 1015)] + ["mean"]
    assert [r[0] for r in marked.rows] == [f"step {k}" for k in range(1, 7)] + ["mean"]
    assert [r[1:] for r in marked.rows] == [r[1:] for r in default.rows]
    # the parallel pass reads the marker too: seven chunks of the 98 MB file, seams inside steps
    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 15_000_000)
    agg, _ = aggregate_file_jobs(path, "x", 3, marker=marker)
    assert _overview(agg).rows == marked.rows


def test_a_loop_without_step_ranges_gets_its_forwards_as_steps(records):
    # HTA's critical-path AlexNet trace (PARAM's benchmark): no ProfilerStep range; two forwards named
    # "[param|...|warmup|forward]" and two "...|measure|forward", each pair nested (the outer one is the step)
    path = records["hta_critical_path_alexnet.json.gz"]
    events = json.load(gzip.open(EXTERNAL / "hta_critical_path_alexnet.json.gz"))["traceEvents"]
    fwd = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                 if e.get("cat") == "user_annotation" and e["name"].endswith("|forward]"))
    outer = [fwd[0], fwd[2]]  # each pair's first holds its second
    assert fwd[0][0] < fwd[1][0] and fwd[1][1] <= fwd[0][1] and fwd[2][0] < fwd[3][0] and fwd[3][1] <= fwd[2][1]
    # recount: the kernels whose launch (its correlation's runtime call) lies inside each outer forward
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    kernels = [launch.get(e["args"]["correlation"]) for e in events if e.get("cat") == "kernel"]
    counts = [sum(1 for t in kernels if t is not None and lo <= t <= hi) for lo, hi in outer]
    assert counts == [39, 39] and len(kernels) == 79  # and one kernel launched outside both
    t = _overview(aggregate_files([path], marker=StepMarker("*|forward]")))
    c = t.columns
    # the first step's window starts at the worker's first GPU activity (the windows partition the span): it
    # holds the kernel launched before the first forward too
    assert [(r[0], r[c.index("kernels")]) for r in t.rows[:2]] == [("step 1", 79 - counts[1]),
                                                                   ("step 2", counts[1])]
    assert any("the ranges --step-marker '*|forward]' names" in n for n in t.notes)


def test_a_marker_that_names_no_range_is_refused_in_one_line(records, capsys):
    assert main([records["hta_critical_path_alexnet.json.gz"], "--view", "overview", "--step-marker",
                 "execute_*"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == ("pyprof prof: error: --step-marker 'execute_*': no activity ran under a "
                                         "range so named (a name is matched whole: * and ? match any text, as in "
                                         "'execute_*')")


def test_records_without_range_times_cannot_tell_instances_apart(records, tmp_path):
    # the same records as an older parse wrote them, without range_ns: the marker's ranges cannot be told apart
    old = tmp_path / "old.dict"
    with open(records["hta_critical_path_alexnet.json.gz"]) as f, open(old, "w") as g:
        for line in f:
            d = json.loads(line)
            d.pop("range_ns", None)
            g.write(json.dumps(d) + "\n")
    with pytest.raises(UsageError, match="lack their push times"):
        aggregate_files([str(old)], marker=StepMarker("*|forward]"))


def test_load_takes_the_marker_too(records):
    import pyprof

    loaded = pyprof.load(records["hta_critical_path_alexnet.json.gz"], views=True, step_marker="*|forward]")
    assert list(loaded.views["overview"]["step"]) == ["step 1", "step 2", "mean"]
    with pytest.raises(UsageError, match="no activity ran under a range so named"):
        pyprof.load(records["hta_critical_path_alexnet.json.gz"], views=True, step_marker="execute_*")


def test_a_bracket_in_the_name_is_itself(records):
    # PARAM's ranges start with "[": only * and ? are wildcards, so a name written whole, or with a *, matches them
    path = records["hta_critical_path_alexnet.json.gz"]
    for marker, steps in [("[param|*|forward]", 2), ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1)]:
        t = _overview(aggregate_files([path], marker=StepMarker(marker)))
        assert [r[0] for r in t.rows if r[0].startswith("step")] == [f"step {k}" for k in range(1, steps + 1)]


def _rank_rows(files, *options):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*files, "--view", "ranks", "--jsonl", "-q", *options]) == 0
    return [json.loads(x) for x in out.getvalue().splitlines()]


def test_rank_files_take_the_marker_each(capsys):
    # HTA's two sampled rank traces, each summarised on its own: every rank has two ProfilerStep ranges, and four
    # nccl:all_reduce and four nccl:all_to_all user ranges with kernels under them (a JSON count of the
    # user_annotation events): the marker makes the eight the steps, which partition the same span
    require_shared()
    files = [str(EXTERNAL / f"hta_trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    for f in files:
        events = json.load(gzip.open(f))["traceEvents"]
        assert sum(e.get("cat") == "user_annotation" and e["name"] in ("nccl:all_reduce", "nccl:all_to_all")
                   for e in events) == 8
    default = _rank_rows(files)
    marked = _rank_rows(files, "--step-marker", "nccl:all_*")
    assert [r["steps"] for r in default] == [2, 2] and [r["steps"] for r in marked] == [8, 8]
    for d, m in zip(default, marked):
        assert m["step_ms"] * 8 == pytest.approx(d["step_ms"] * 2, rel=2e-3)
        assert m["comm_ms"] == d["comm_ms"]  # the kernels are the same; only the steps moved
    # a name that one rank's file never ran under: that file is named, in one line, before any table
    assert main([*files, "--view", "ranks", "--step-marker", "## alltoall_bwd_single ##"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"pyprof prof: error: {files[0]}: --step-marker '## alltoall_bwd_single ##': no activity")
