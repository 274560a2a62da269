"""Issue 13 for ``pyprof report``: any records file or export either gives a complete HTML page whose data is
strict JSON (no name can close its script element), or is refused with one line naming the file, and no page,
trace or temporary is left behind; output paths that cannot be written are refused the same way.

Regression tests per class on hand-made inputs, then a seeded sweep of the records mutation classes and of the
output-path class.
"""
from __future__ import annotations

import json

import pytest

import tiny_inputs as tiny
from robust_helpers import bounded, keeps_promise, run, seeded_sweep

from bench.fuzz.judge import lock
from bench.fuzz.paths_mut import full_device
from bench.fuzz.registry import MUTATIONS, Command, load_all


def report(path, out: str = "out.html", trace: str | None = None, names=(), must_succeed=False) -> Command:
    argv = [str(path), "-o", out] + (["--trace", trace] if trace else [])
    extra = (("trace.json", "json"),) if trace == "trace.json" else ()
    return Command("report", argv, (str(path), *names), stdout_kind=None,
                   output=out if not out.startswith("/") else None, output_kind="html", extra_outputs=extra,
                   must_succeed=must_succeed)


def _records(case, *lines):
    return tiny.records(case / "in" / "net.dict", *lines)


def test_the_tiny_records_report(case):
    keeps_promise(run(report(_records(case), trace="trace.json", must_succeed=True), case), must_succeed=True)


def test_the_tiny_export_reports(case):
    path = tiny.nsys(case / "in" / "tiny.sqlite")
    keeps_promise(run(report(path, must_succeed=True), case), must_succeed=True)


WRONG = [("layer", 5), ("grid", "4,1,1"), ("args", [5]), ("args", [{"type": 5}]), ("api", {"a": 1}),
         ("kDuration", "500"), ("start_ns", None), ("end_ns", "x"), ("op", 5), ("mod", {"a": 1}), ("fwd", 5),
         ("pid", [1]), ("tid", {"a": 1}), ("device", "0"), ("stream", 1.5), ("gpu", 5), ("callsite", 5),
         ("ranges", 5), ("kShortName", None), ("dir", 5)]


@pytest.mark.parametrize("key,value", WRONG, ids=[f"{k}={json.dumps(v)}" for k, v in WRONG])
def test_wrong_type(case, key, value):
    keeps_promise(run(report(_records(case, tiny.record(**{key: value}), tiny.record()), trace="trace.json"), case))


@pytest.mark.parametrize("key,source", [("mod", "5"), ("mod", "{1, 2}"), ("op", "b'mm'"), ("grid", "1j"),
                                        ("kDuration", "1e999"), ("marker", "[5]"), ("seqId", "{1, 2}"),
                                        ("altSeqId", "(3, 4)"), ("layer", "[b'x']")])
def test_legacy_dict_line_of_odd_type(case, key, source):
    keeps_promise(run(report(tiny.legacy(case / "in" / "old.dict", **{key: source})), case))


@pytest.mark.parametrize("key,token", [("kDuration", "NaN"), ("start_ns", "Infinity"),
                                       ("args", '[{"type":"float","value":NaN}]'), ("est_occupancy_pct", "1e999")])
def test_nonfinite_numbers(case, key, token):
    line = json.dumps(tiny.record(**{key: "@T@"})).replace('"@T@"', token)
    keeps_promise(run(report(_records(case, line, tiny.record()), trace="trace.json"), case))


@pytest.mark.parametrize("name", ["</script><script>alert(1)</script>", "<!--", "\x1b[31mred", "a\u2028b",
                                  "nul\x00"], ids=["script", "comment", "esc", "u2028", "nul"])
def test_hostile_names(case, name):
    path = _records(case, tiny.record(kShortName=name, kLongName=name, op=[name], layer=[name]), tiny.record())
    keeps_promise(run(report(path, trace="trace.json", must_succeed=True), case), must_succeed=True)


def test_records_with_a_long_first_line(case):
    # A valid records file whose first line is longer than report's look at it (a 2 MB kernel name).
    path = _records(case, tiny.record(kLongName="void k<" + "x" * (2 << 20) + ">()"), tiny.record())
    keeps_promise(run(report(path, must_succeed=True), case), must_succeed=True)


def test_malformed_line_names_file_and_line(case):
    path = case / "in" / "net.dict"
    path.write_bytes(json.dumps(tiny.record()).encode() + b"\n" + b'{"kShortName": ' + b"\n")
    v = run(report(path), case)
    keeps_promise(v)


def test_corrupt_export(case):
    path = tiny.nsys(case / "in" / "tiny.sqlite")
    data = bytearray(path.read_bytes())
    data[4096:8192] = bytes(4096)
    path.write_bytes(bytes(data))
    keeps_promise(run(report(path), case))


@pytest.mark.parametrize("where", ["existing folder", "missing folder", "read-only folder", "trace into folder"])
def test_output_path(case, where):
    path = _records(case)
    folder = case / "in" / "adir"
    folder.mkdir()
    (folder / "keep.txt").write_text("the user's")
    if where == "existing folder":
        cmd = report(path, out=str(folder), names=(str(folder),))
    elif where == "missing folder":
        out = str(case / "in" / "no" / "such" / "page.html")
        cmd = report(path, out=out, names=(out, str(case / "in" / "no" / "such")))
    elif where == "read-only folder":
        ro = case / "in" / "readonly"
        ro.mkdir()
        if not lock(ro):
            pytest.skip("root without chattr: a read-only folder cannot be made here")
        out = str(ro / "page.html")
        cmd = report(path, out=out, names=(out, str(ro)))
    else:
        cmd = report(path, trace=str(folder), names=(str(folder),))
    keeps_promise(run(cmd, case))


@pytest.mark.parametrize("what", ["-o", "--trace"])
def test_full_disk(case, what):
    path = _records(case)
    full = full_device(case / "in")
    cmd = report(path, out=full, names=(full,)) if what == "-o" else report(path, trace=full, names=(full,))
    cmd.device = full
    keeps_promise(run(cmd, case))


def test_deep_record(case):
    line = json.dumps(tiny.record(layer="@D@")).replace('"@D@"', "[" * 200_000 + "]" * 200_000)
    keeps_promise(bounded(report(_records(case, line)), case, limit=10))


load_all()
#: Classes whose cases take seconds (a 20 MB name): prof's scaling test covers them, the bench runs them.
SLOW = {"json.huge_name", "rec.huge_name"}
BOUNDED = {"rec.deep", "rec.huge_name"}
CLASSES = sorted(n for n in MUTATIONS if n.startswith("rec.") and n not in SLOW) + ["out.report"]
CASES_PER_CLASS = 3


@pytest.mark.parametrize("cls", CLASSES)
def test_seeded_mutations(small_seeds, tmp_path, cls):
    def pick(cmd):
        if cmd.stage == "prof":  # prof's own sweep covers it; the report runs on the same input
            return Command("report", [cmd.argv[-1], "-o", "out.html"], cmd.names, stdout_kind=None,
                           output="out.html", output_kind="html", must_succeed=cmd.must_succeed)
        return cmd

    broken = seeded_sweep(cls, small_seeds, tmp_path, 19, CASES_PER_CLASS, BOUNDED, pick)
    assert not broken, "\n".join(broken)

