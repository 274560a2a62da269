"""The records contract between parse and its readers (docs/record.md): parse closes each input's records with an
end line that counts them, and prof and report refuse records of schema 2 that lack it (a parse that failed or
was killed part way), fields of the wrong type, deep nesting and records of a newer schema, each in one line
that names the file and the line, with nothing on stdout. On records parse made from a committed capture (schema 4:
a header line, the records, the end line)."""
from __future__ import annotations

import io
import json
import lzma
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pyprof.common import InputError
from pyprof.prof.table import parallel
from pyprof.prof.table.columns import COLUMNS
from pyprof.prof.table.per_kernel import run_stream
from pyprof.record import read_lines

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "data" / "nsys" / "pyprof" / "lenet.sqlite.xz"


def _cli(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], input=stdin, capture_output=True, cwd=ROOT)


def _n_records(lines: list[bytes]) -> int:
    """Record lines among parse's lines: all but its header, side (host time, memory) and end lines."""
    return sum(1 for x in lines if not x.startswith((b'{"pyprof_header":', b'{"pyprof_side":', b'{"pyprof_end":')))


@pytest.fixture(scope="module")
def lenet(tmp_path_factory) -> tuple[Path, list[bytes]]:
    """The capture's records file as parse writes it, and its lines."""
    folder = tmp_path_factory.mktemp("contract")
    export = folder / "lenet.sqlite"
    export.write_bytes(lzma.decompress(CAPTURE.read_bytes()))
    out = folder / "lenet.dict"
    p = _cli("pyprof.parse", "-q", str(export), "-o", str(out))
    assert p.returncode == 0, p.stderr
    return out, out.read_bytes().splitlines()


def test_parse_ends_its_records_with_a_line_that_counts_them(lenet, tmp_path):
    path, lines = lenet
    end = json.loads(lines[-1])
    assert json.loads(lines[0])["pyprof_header"] is True
    assert end == {"pyprof_end": True, "schema": 4, "records": _n_records(lines)}  # all lines but header, side, end
    # The count is the export's GPU activities, by sqlite3: kernels, copies and sets.
    export = tmp_path / "lenet.sqlite"
    export.write_bytes(lzma.decompress(CAPTURE.read_bytes()))
    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    activities = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
                     ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                     if t in tables)
    con.close()
    assert end["records"] == activities
    # Two inputs: each input's records open with their own header and close with their own end line.
    p = _cli("pyprof.parse", "-q", str(export), str(export))
    both = p.stdout.splitlines()
    assert p.returncode == 0 and len(both) == 2 * len(lines)
    assert json.loads(both[len(lines) - 1]) == end and json.loads(both[-1]) == end
    assert json.loads(both[len(lines)]) == json.loads(lines[0])


def _cut(tmp_path: Path, lines: list[bytes], keep: int, last: bytes | None = None) -> Path:
    out = tmp_path / "cut.dict"
    body = lines[:keep] + ([last] if last is not None else [])
    out.write_bytes(b"\n".join(body) + b"\n")
    return out


CUT = "the records end without parse's end line"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_records_cut_short_are_refused_before_any_row(lenet, tmp_path, jobs):
    path, lines = lenet
    ok = _cli("pyprof.prof", "-q", "-j", jobs, str(path))
    # the table's header and a row per record: parse's header and end lines get no row
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == _n_records(lines) + 1
    for keep, last in ((len(lines) - 1, None), (40, lines[40][:25])):  # the end line lost; a record cut mid-line
        cut = _cut(tmp_path, lines, keep, last)
        p = _cli("pyprof.prof", "-q", "-j", jobs, str(cut))
        assert p.returncode == 1 and p.stdout == b""
        assert p.stderr.decode().splitlines() == [f"pyprof prof: error: {cut}: " + p.stderr.decode().split(
            f"{cut}: ", 1)[1].rstrip("\n")]
        assert CUT in p.stderr.decode()  # a record cut mid-line is not an end line either
    # From a pipe (parse's stdout through `head`): the same refusal once the input ends.
    p = _cli("pyprof.prof", "-q", "-j", jobs, "-", stdin=b"\n".join(lines[:100]) + b"\n")
    assert p.returncode == 1 and CUT in p.stderr.decode() and "<stdin>" in p.stderr.decode()


@pytest.mark.parametrize("cmd", [["pyprof.prof", "--group-by", "op"], ["pyprof.prof", "--view", "all"],
                                 ["pyprof.report", "-o", "page.html"]])
def test_every_reader_refuses_records_cut_short(lenet, tmp_path, cmd):
    _path, lines = lenet
    cut = _cut(tmp_path, lines, len(lines) - 1)
    p = subprocess.run([sys.executable, "-m", *cmd[:1], str(cut), *cmd[1:]], capture_output=True, cwd=tmp_path)
    assert p.returncode == 1 and p.stdout == b"" and CUT in p.stderr.decode() and str(cut) in p.stderr.decode()
    assert not (tmp_path / "page.html").exists()


def test_parallel_pipe_and_file_find_the_missing_end_line_across_chunks(lenet, monkeypatch):
    """Several inputs' records joined (each closed by its end line) read the same serially and in parallel,
    over chunks far smaller than the input; the same joined records without the last end line are refused by
    every path."""
    _path, lines = lenet
    joined = b"\n".join(lines * 3) + b"\n"
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 16 << 10)
    assert len(joined) > 20 * parallel.CHUNK_BYTES
    cols = list(COLUMNS)
    outs = []
    for jobs in (1, 2, 3):
        buf = io.StringIO()
        run_stream(io.BytesIO(joined), "joined", buf, cols, "csv", jobs=jobs)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1] == outs[2]
    assert outs[0].count("\n") == 1 + 3 * _n_records(lines)  # the header, side and end lines get no row
    cut = joined[: joined.rindex(b'{"pyprof_end"')]
    for jobs in (1, 2, 3):
        with pytest.raises(InputError, match=CUT):
            run_stream(io.BytesIO(cut), "joined", io.StringIO(), cols, "csv", jobs=jobs)


def test_records_of_schema_1_need_no_end_line(tmp_path, lenet):
    """Files written before the end line existed (schema 1) still read."""
    _path, lines = lenet
    old = tmp_path / "old.dict"
    # every key on every line, each record saying schema 1; no header and no end line
    old.write_text("".join(json.dumps({**d, "schema": 1}) + "\n" for d in read_lines(lines)))
    p = _cli("pyprof.prof", "-q", str(old))
    assert p.returncode == 0 and len(p.stdout.splitlines()) == _n_records(lines) + 1  # the table's header + a row a record


def test_an_end_line_alone_is_no_records(tmp_path):
    path = tmp_path / "none.dict"
    path.write_text('{"pyprof_end":true,"schema":2,"records":0}\n')
    p = _cli("pyprof.prof", "-q", "--csv", str(path))
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1  # the header


# Per-kernel rows read a record's model keys and their columns' keys (reader.lean_loads), and check those; the
# views, --group-by and report read, and check, every key of docs/record.md.
_READ = [("kDuration", "500"), ("kDuration", 2 ** 70), ("gpu", 5), ("fwd", 5), ("args", [5]), ("args", {"a": 1}),
         ("op", 5)]
_VIEWS_ONLY = [("layer", 5), ("grid", {"x": 1}), ("start_ns", "x"), ("start_ns", -(2 ** 64)), ("ranges", [[1]])]


@pytest.mark.parametrize("key, value, view", [(k, v, []) for k, v in _READ] +
                         [(k, v, ["--view", "all"]) for k, v in _READ + _VIEWS_ONLY])
def test_a_field_of_the_wrong_type_is_named(lenet, tmp_path, key, value, view):
    _path, lines = lenet
    bad = [*lines]
    d = json.loads(bad[8])  # a max_pool2d kernel with its arguments (its formula reads them); line 9
    assert d["op"] == ["max_pool2d", "max_pool2d"] and d["args"]
    d[key] = value
    bad[8] = json.dumps(d).encode()
    path = tmp_path / "typed.dict"
    path.write_bytes(b"\n".join(bad) + b"\n")
    p = _cli("pyprof.prof", "-q", *view, str(path))
    err = p.stderr.decode()
    assert p.returncode == 1 and p.stdout == b"" and len(err.splitlines()) == 1, err
    assert f"{path}: line 9: a record field has an unexpected type" in err and key in err


def test_deep_and_newer_records_are_refused(lenet, tmp_path):
    _path, lines = lenet
    d = json.loads(lines[4])  # a max_pool2d kernel, line 5: its formula reads the arguments
    d["args"] = [{"type": "tuple", "value": "@"}]
    deep = json.dumps(d).replace('"@"', "[" * 30 + "]" * 30).encode()
    # 21 lists inside an argument's value: record (1), args (2), the argument (3), then 4..24: the deepest allowed.
    deepest = json.dumps(d).replace('"@"', "[" * 21 + "]" * 21).encode()
    path = tmp_path / "deepest.dict"
    path.write_bytes(b"\n".join([*lines[:4], deepest, *lines[5:]]) + b"\n")
    for view in ([], ["--view", "overview"]):
        p = _cli("pyprof.prof", "-q", *view, str(path))
        assert p.returncode == 0 and p.stdout, p.stderr
    deeper = json.dumps(d).replace('"@"', "[" * 22 + "]" * 22).encode()
    for line, says in ((deep, "nested deeper than 24 levels"), (deeper, "nested deeper than 24 levels")):
        path = tmp_path / "x.dict"
        path.write_bytes(b"\n".join([*lines[:4], line, *lines[5:]]) + b"\n")
        for view in ([], ["--view", "overview"]):
            p = _cli("pyprof.prof", "-q", *view, str(path))
            assert p.returncode == 1 and p.stdout == b"", p.stderr
            assert f"{path}: line 5:" in p.stderr.decode() and says in p.stderr.decode()
    # Records a newer pyprof wrote (schema 4 in the header and the end line): refused at their first line.
    path = tmp_path / "newer.dict"
    path.write_bytes(b"\n".join(x.replace(b'"schema":4', b'"schema":5') for x in lines) + b"\n")
    for view in ([], ["--view", "overview"], ["--group-by", "op"]):
        p = _cli("pyprof.prof", "-q", *view, str(path))
        assert p.returncode == 1 and p.stdout == b"", p.stderr
        assert f"{path}: line 1: records of schema 5, newer than this pyprof reads (4)" in p.stderr.decode()


def test_a_legacy_line_naming_one_op_as_a_string(tmp_path):
    # The original PyProf wrote mod and op as lists; a line giving one name as a string is that name, not its
    # characters (which showed as module "t", op "m").
    path = tmp_path / "old.dict"
    path.write_text("{'kShortName': 'k', 'kLongName': 'k', 'kDuration': 100, 'dir': 'fprop', 'mod': 'torch', "
                    "'op': 'mm', 'marker': [], 'seqId': [], 'altSeqId': [], 'layer': [], 'trace': [], "
                    "'grid': (1, 1, 1), 'block': (32, 1, 1)}\n")
    p = _cli("pyprof.prof", "-q", "-c", "mod,op", str(path))
    assert p.returncode == 0 and p.stdout.decode().split() == ["Module", "Op", "torch", "mm"], p.stderr


def test_a_header_longer_than_the_ends_read_is_read_whole(lenet, tmp_path, monkeypatch):
    """check_file_ending reads ENDS_BYTES at each end of a file; parse's header line may be longer (a GPU's name
    is the export's text). It is read whole, so a file and a pipe of the same records give the same rows, where
    the file was refused as 'a damaged header line' (fuzz seed 2719, a 3 MB header)."""
    from pyprof.prof.load import contract
    from pyprof.record import header_line

    path, lines = lenet
    assert lines[0].startswith(b'{"pyprof_header":')
    gpus = json.loads(lines[0])["gpus"]
    for props in gpus.values():
        props["gpu"] = props["gpu"] + " " + "x" * 3000  # a long name: the header is now > 3 kB
    long_header = header_line(gpus).encode()
    data = b"\n".join([long_header, *lines[1:]]) + b"\n"
    target = tmp_path / "long_header.dict"
    target.write_bytes(data)
    monkeypatch.setattr(contract, "ENDS_BYTES", 1024)
    outs = []
    for pipe in (False, True):
        buf = io.StringIO()
        with open(target, "rb") as f:
            run_stream(io.BytesIO(f.read()) if pipe else f, str(target), buf, ["idx", "op", "kernel"], "csv")
        outs.append(buf.getvalue())
    assert outs[0] == outs[1] and len(outs[0].splitlines()) == _n_records(lines) + 1


def test_a_first_record_longer_than_the_ends_read_still_needs_its_end_line(tmp_path, monkeypatch):
    """Records of schema 2 (no header) ask for parse's end line by their first record; one longer than the bytes
    check_file_ending reads is read whole, so a file cut short is refused before any row, as a short one is."""
    from pyprof.common import InputError
    from pyprof.prof.load import contract

    monkeypatch.setattr(contract, "ENDS_BYTES", 1024)
    rec_ = {"schema": 2, "kind": "kernel", "kShortName": "k" * 3000, "kDuration": 10, "tid": 1}
    path = tmp_path / "cut.dict"
    path.write_text("\n".join(json.dumps(rec_) for _ in range(3)) + "\n")
    buf = io.StringIO()
    with open(path, "rb") as f, pytest.raises(InputError, match=CUT):
        run_stream(f, str(path), buf, ["idx", "kernel"], "csv", header=False)
    assert buf.getvalue() == ""
