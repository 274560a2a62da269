"""Issue 39: the diff's sentences (the step change's split, the GPUs, lines, --fail-if-slower) rest on what the two
runs hold. Each fires on a pair that has its evidence and stays silent on one that lacks it."""
from __future__ import annotations

import gzip
import json
import sqlite3
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from pyprof.diff.cli import SLOWER, main
from pyprof.diff.compare import compare
from pyprof.diff.runs import load
from pyprof.record import end_line, header_line
from pyprof.report.cli import records_sources

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shared_files import require_shared  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
FOREACH = str(DATA / "diff" / "transformer_foreach.sqlite.xz")
FUSED = str(DATA / "diff" / "transformer_fused.sqlite.xz")
FOREACH_TRACE = str(DATA / "diff" / "transformer_foreach.pt.trace.json.gz")
LENET = str(DATA / "kineto" / "lenet.pt.trace.json.gz")


@pytest.fixture(scope="module")
def runs():
    cache: dict = {}

    def get(path: str, label: str):
        if (path, label) not in cache:
            with ExitStack() as stack:
                cache[path, label] = load(label, records_sources([path], stack))
        return cache[path, label]
    return get


def _notes(diff, table="diff_steps"):
    return [n for t in diff.tables if t.name == table for n in t.notes]


def test_same_gpu_and_same_kind_of_steps_say_nothing_of_either(runs):
    d = compare(runs(FOREACH, "base"), runs(FUSED, "new"))
    notes = " ".join(_notes(d))
    assert d.gpus is None and d.not_per_step is None
    assert "different GPUs" not in notes and "Cannot" not in notes and "step = kernel + copy + idle" in notes


def test_step_ranges_against_optimizer_steps_cannot_compare_the_mean_step(runs, capsys):
    base, new = runs(FOREACH, "base"), runs(FOREACH_TRACE, "new")
    assert base.step_sources == ["ProfilerStep"] and new.step_sources == ["optimizer steps"]
    d = compare(base, new)
    (note,) = [n for n in _notes(d) if n.startswith("Cannot compare the mean step")]
    assert "new has no step ranges" in note and "base's 2 steps from ProfilerStep" in note
    # the same run seen twice is 34.6% "slower" by its mean step (16.675 vs 12.386 ms: the trace's window holds
    # what ran before its first step): --fail-if-slower refuses to judge rather than fail the build on it
    rc = main([FOREACH, FOREACH_TRACE, "--fail-if-slower", "5", "-q", "--table", "steps"])
    out, err = capsys.readouterr()
    assert rc == 1 and out == "" and "cannot compare the mean step" in err and "NEW is" not in err


def test_a_whole_capture_against_steps_is_no_step(runs):
    path = str(require_shared() / "corpus" / "nsys" / "nsys2024.5_pipit_cloverleaf.sqlite")
    with sqlite3.connect(path) as con:  # no NVTX at all: no step ranges
        assert not con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone()[0]
    d = compare(runs(path, "base"), runs(FOREACH, "new"))
    (note,) = [n for n in _notes(d) if n.startswith("Cannot compare the mean step")]
    assert "base has no steps" in note and "its whole capture" in note


def test_different_gpus_are_said_and_the_verdict_names_them(runs, capsys):
    path = str(require_shared() / "corpus" / "nvprof" / "nvprof_v12_no_markers.nvvp")
    with sqlite3.connect(path) as con:
        nvprof_gpu = con.execute("SELECT value FROM StringTable WHERE _id_ = "
                                 "(SELECT name FROM CUPTI_ACTIVITY_KIND_DEVICE)").fetchone()[0]
    with gzip.open(LENET) as f:
        lenet_gpu = {p["name"] for p in json.load(f)["deviceProperties"]}
    assert nvprof_gpu == "TITAN V" and lenet_gpu == {"NVIDIA H200"}
    d = compare(runs(path, "base"), runs(LENET, "new"))
    assert d.gpus == (["TITAN V"], ["NVIDIA H200"])
    assert any("ran on different GPUs (base: TITAN V; new: NVIDIA H200)" in n for n in _notes(d))
    # both runs are one window over their capture (no step ranges): their mean steps are of one kind
    assert d.not_per_step is None
    rc = main([LENET, path, "--fail-if-slower", "0", "-q", "--table", "steps"])
    _, err = capsys.readouterr()
    if rc == SLOWER:
        assert "different GPUs (base: NVIDIA H200; new: TITAN V)" in err
    else:
        rc = main([path, LENET, "--fail-if-slower", "0", "-q", "--table", "steps"])
        _, err = capsys.readouterr()
        assert rc == SLOWER and "different GPUs (base: TITAN V; new: NVIDIA H200)" in err


def test_a_run_without_activity_cannot_be_split_and_says_which(runs, tmp_path):
    empty = tmp_path / "empty.jsonl"
    # what parse writes for a profile without GPU activity: its header and end lines alone
    empty.write_text(header_line({}) + "\n" + end_line(0) + "\n")
    d = compare(runs(str(empty), "base"), runs(FOREACH, "new"))
    (note,) = [n for n in _notes(d) if n.startswith("Cannot split")]
    assert "base has no GPU activity" in note and "new" not in note.split(":", 1)[1].split(";")[0]
    assert not any(n.startswith("step = kernel") for n in _notes(d))


def test_line_note_only_for_a_run_without_lines(runs):
    silent = compare(runs(FOREACH, "base"), runs(FUSED, "new"), "line")
    assert not any(n.startswith("Cannot match by line") for n in _notes(silent, "diff_line"))
    fires = compare(runs(FOREACH, "base"), runs(FOREACH_TRACE, "new"), "line")
    (note,) = [n for n in _notes(fires, "diff_line") if n.startswith("Cannot match by line")]
    assert "no activity of new has a recorded line" in note


def test_two_whole_captures_say_their_steps_are_the_captures(runs):
    corpus = require_shared() / "corpus"
    nvprof, nsys = str(corpus / "nvprof" / "nvprof_v12_no_markers.nvvp"), \
        str(corpus / "nsys" / "nsys2024.5_pipit_cloverleaf.sqlite")
    d = compare(runs(nvprof, "base"), runs(nsys, "new"))
    assert runs(nvprof, "base").step_sources == runs(nsys, "new").step_sources == ["whole capture"]
    assert d.not_per_step is None and any(n.startswith("Neither run has steps") for n in _notes(d))
    # one run of steps: silent
    assert not any(n.startswith("Neither run") for n in _notes(compare(runs(FOREACH, "base"), runs(FUSED, "new"))))


def test_kernels_of_one_run_only_note_only_with_such_kernels(runs):
    same = compare(runs(FOREACH, "base"), runs(FOREACH, "new"))
    assert [t.rows for t in same.tables if t.name == "diff_kernels_only"] == [[]]
    assert _notes(same, "diff_kernels_only") == []
    (t,) = [t for t in same.tables if t.name == "diff_kernels_only"]
    assert t.empty.startswith("Every kernel ran in both runs")  # said, where a bare header would be
    other = compare(runs(FOREACH, "base"), runs(FUSED, "new"))  # foreach's functors against the fused kernel
    assert any(n.startswith("Kernels by name") for n in _notes(other, "diff_kernels_only"))
    (t,) = [t for t in other.tables if t.name == "diff_kernels_only"]
    assert t.rows and t.empty is None


def test_the_page_summary_says_how_each_runs_steps_were_found(tmp_path, capsys):
    page = tmp_path / "d.html"
    assert main([FOREACH, FOREACH_TRACE, "-o", str(page), "-q", "--table", "steps"]) == 0
    capsys.readouterr()
    text = page.read_text()
    # the nsys capture has 2 ProfilerStep ranges; the trace none, and 2 optimizer steps
    assert "base: 2 steps (ProfilerStep); new: 2 steps (optimizer steps)" in text
