"""Issue 13 for ``pyprof.prof``: any records file (parse's JSON lines or the original PyProf's dict lines) either
gives a valid table (strict JSON lines with --jsonl; one line per record, no raw control characters and never
wider than -w in the text formats), or is refused with one line naming the file, nothing on stdout.

Regression tests per class on hand-made records, then a seeded sweep of the records mutation classes over
records that parse made from small real captures.
"""
from __future__ import annotations

import json

import pytest

import tiny_inputs as tiny
from robust_helpers import bounded, keeps_promise, linear_time, run, seeded_sweep

from bench.fuzz.paths_mut import full_device
from bench.fuzz.registry import MUTATIONS, Command, load_all

# w80 without its header: a columnated header may wrap onto more lines, and each record must stay one line
FORMATS = {"space": ([], "text", None), "w80": (["-w", "80", "--no-header"], "text", 80),
           "jsonl": (["--jsonl"], "jsonl", None),
           "csv": (["--csv"], "csv", None), "group": (["--group-by", "op", "--jsonl"], "jsonl", None),
           "views": (["--view", "all", "--jsonl"], "jsonl", None)}


def prof(path, fmt: str = "space", n_records: int | None = None, must_succeed: bool = False) -> Command:
    argv, kind, width = FORMATS[fmt]
    expect = n_records + (fmt != "w80") if n_records is not None and fmt in ("space", "w80", "csv") else None
    return Command("prof", ["-q", *argv, str(path)], (str(path),), stdout_kind=kind, width=width,
                   expect_lines=expect, must_succeed=must_succeed)


def _records(case, *lines):
    return tiny.records(case / "in" / "net.dict", *lines)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_tiny_records_print(case, fmt):
    keeps_promise(run(prof(_records(case), fmt, n_records=3, must_succeed=True), case), must_succeed=True)


# -- Wrong types in every field a reader uses -------------------------------------------------------------------

WRONG = [("layer", 5), ("grid", "4,1,1"), ("grid", [None, "x", 1]), ("block", 128), ("args", [5]),
         ("args", [{"type": 5, "shape": "4x8"}]), ("args", {"a": 1}), ("api", {"name": "cudaLaunchKernel"}),
         ("kDuration", "500"), ("kDuration", None), ("start_ns", "x"), ("op", 5), ("op", [5]), ("mod", {"a": 1}),
         ("fwd", 5), ("fwd", {"op": 5, "args": "x"}), ("dir", 5), ("seqId", "3"), ("device", "0"), ("gpu", 5),
         ("gpu_props", [1]), ("marker", 5), ("ranges", 5), ("callsite", 5), ("outputs", 5),
         ("est_occupancy_pct", "x"), ("registers", "32"), ("kShortName", None), ("kLongName", 5), ("schema", "1")]


@pytest.mark.parametrize("fmt", ["space", "views"])
@pytest.mark.parametrize("key,value", WRONG, ids=[f"{k}={json.dumps(v)}" for k, v in WRONG])
def test_wrong_type(case, key, value, fmt):
    path = _records(case, tiny.record(**{key: value}), tiny.record())
    keeps_promise(run(prof(path, fmt), case))


LEGACY = [("mod", "5"), ("mod", "{1, 2}"), ("op", "b'mm'"), ("grid", "1j"), ("kDuration", "1e999"),
          ("kDuration", "'500'"), ("marker", "[5]"), ("marker", "['{1, 2}']"), ("dir", "None"), ("layer", "{'a': 1}"),
          ("seqId", "(1, 2)"), ("seqId", "{1, 2}"), ("kShortName", "None"), ("args", "5")]


@pytest.mark.parametrize("key,source", LEGACY, ids=[f"{k}={v}" for k, v in LEGACY])
def test_legacy_dict_line_of_odd_type(case, key, source):
    path = tiny.legacy(case / "in" / "old.dict", **{key: source})
    keeps_promise(run(prof(path, "space"), case))


@pytest.mark.parametrize("line", ["{1, 2}", "[1, 2]", "{'a': " + "[" * 50_000 + "]" * 50_000 + "}"],
                         ids=["set", "list", "deep"])
def test_legacy_line_that_is_no_dict(case, line):
    path = _records(case, tiny.record(), line)
    keeps_promise(bounded(prof(path, "space"), case, limit=10))


# -- Non-finite numbers, malformed lines ------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "group", "views"])
@pytest.mark.parametrize("key,token", [("kDuration", "NaN"), ("start_ns", "Infinity"), ("est_occupancy_pct", "NaN"),
                                       ("args", '[{"type":"float","value":NaN}]'), ("grid", "[1e999,1,1]")])
def test_nonfinite_numbers(case, key, token, fmt):
    line = json.dumps(tiny.record(**{key: "@T@"})).replace('"@T@"', token)
    keeps_promise(run(prof(_records(case, line, tiny.record()), fmt), case))


@pytest.mark.parametrize("line", [b'{"kShortName": "k', b"[1, 2, 3]", b"42", b"null", b"\xff\xfe{}", b"{}",
                                  b"kernel"], ids=["cut", "array", "number", "null", "binary", "empty", "word"])
def test_malformed_line(case, line):
    path = case / "in" / "net.dict"
    path.write_bytes(json.dumps(tiny.record()).encode() + b"\n" + line + b"\n")
    keeps_promise(run(prof(path, "jsonl"), case))


def test_refusal_after_output(case):
    # More rows than prof commits at a time (64k), then a malformed line: nothing may be on stdout.
    line = json.dumps(tiny.record())
    path = case / "in" / "net.dict"
    path.write_text((line + "\n") * 66_000 + "not a record\n", encoding="utf-8")
    keeps_promise(bounded(prof(path, "jsonl"), case, limit=30))


# -- Names ----------------------------------------------------------------------------------------------------

HOSTILE = {"esc": "\x1b[31mred\x1b[0m", "newline": "two\nlines", "cr": "over\rwrite", "nul": "nul\x00",
           "u2028": "sep\u2028line", "c1": "next\x85line"}


@pytest.mark.parametrize("fmt", ["space", "w80", "csv"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_names_print_one_line_per_record(case, name, fmt):
    path = _records(case, tiny.record(kShortName=HOSTILE[name], op=[HOSTILE[name]]), tiny.record())
    keeps_promise(run(prof(path, fmt, n_records=2, must_succeed=True), case), must_succeed=True)


@pytest.mark.parametrize("argv,width", [([], None), (["-w", "80"], 80), (["--csv"], None)], ids=["space", "w80", "csv"])
def test_hostile_names_in_views(case, argv, width):
    # Every view, titles and notes included: names in tables, the file name in the titles, op names in notes.
    name = HOSTILE["esc"] + HOSTILE["newline"] + HOSTILE["u2028"] + HOSTILE["c1"]
    path = tiny.records(case / "in" / ("net\x1b[2J" + "x" * 100 + ".dict"), tiny.record(
        kShortName=name, kLongName=name, op=[name], layer=[name, name], callsite=name + ":7"), tiny.record())
    cmd = Command("prof", ["-q", "--view", "all", *argv, str(path)], (str(path),),
                  stdout_kind="csv" if argv == ["--csv"] else "text", width=width, must_succeed=True)
    v = run(cmd, case)
    if argv != ["--csv"]:  # the CSV of several views is one CSV per view, one after the other
        keeps_promise(v, must_succeed=True)
    else:
        assert v.rc == 0 and not any(c in v.stdout.decode() for c in "\x1b\r\u2028\x85"), v


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_huge_name_in_linear_time(case, jobs):
    # With -j 2 the name is in the line after a worker's chunk, which the worker reads ahead (it once joined
    # the line's blocks anew for each block read: quadratic).
    def make(mb, folder):
        name = "void k<" + "x" * (mb << 20) + ">()" if mb else "void k<float>()"
        cmd = prof(tiny.records(folder / "net.dict", tiny.record(), tiny.record(kLongName=name, kShortName="k"),
                                tiny.record()), "space", n_records=3, must_succeed=True)
        cmd.argv[1:1] = ["-j", jobs]
        return cmd
    assert linear_time(make, (4, 20), case, per_unit_s=1.0) is None  # a second per MB


def test_deep_record(case):
    line = json.dumps(tiny.record(args="@D@")).replace('"@D@"', "[" * 200_000 + "]" * 200_000)
    keeps_promise(bounded(prof(_records(case, line), "jsonl"), case, limit=10))


def test_full_disk(case):
    path = _records(case)
    full = full_device(case / "in")
    cmd = prof(path, "space")
    cmd.stdout_to, cmd.device, cmd.names = full, full, (str(path), full, "stdout")
    keeps_promise(run(cmd, case))


# -- Seeded mutations of records parse made --------------------------------------------------------------------

load_all()
#: Classes whose cases take seconds (a 20 MB name): the scaling test above covers them, the bench runs them.
SLOW = {"json.huge_name", "rec.huge_name"}
BOUNDED = {"rec.deep", "rec.huge_name"}
RECORD_CLASSES = sorted(n for n, m in MUTATIONS.items() if n.startswith("rec.") and n not in SLOW)
CASES_PER_CLASS = 4


@pytest.mark.parametrize("cls", RECORD_CLASSES)
def test_seeded_mutations(small_seeds, tmp_path, cls):
    broken = seeded_sweep(cls, small_seeds, tmp_path, 17, CASES_PER_CLASS, BOUNDED,
                          lambda cmd: cmd if cmd.stage == "prof" else None)
    assert not broken, "\n".join(broken)



def test_recommendations_of_records_without_gpu_time(tmp_path):
    """Fuzz seed 20261205 case 4295: the custom-module trace's records with an empty object among them. Report's
    views of each worker ran on the empty record's own worker, whose GPU time is 0, and the hotspots rule divided
    by it (a ZeroDivisionError)."""
    import subprocess
    import sys
    from pathlib import Path

    from pyprof.parse import parse_file

    trace = Path(__file__).resolve().parents[1] / "data" / "kineto" / "custom_module.pt.trace.json.gz"
    recs = tmp_path / "r.dict"
    with open(recs, "w") as f:
        parse_file(str(trace), f)
    lines = recs.read_text().splitlines()
    lines.insert(12, "{}")
    recs.write_text("\n".join(lines) + "\n")
    p = subprocess.run([sys.executable, "-m", "pyprof.report", str(recs), "-o", str(tmp_path / "r.html")],
                       capture_output=True, text=True)
    assert "Traceback" not in p.stderr and (p.returncode == 0 or p.stderr.count("\n") == 1), p.stderr
