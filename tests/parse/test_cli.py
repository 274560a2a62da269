"""The parse command, run as users run it (a subprocess): stdout, stderr and exit codes."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from parse_output import records_of

from parse_synth import CORPUS

ROOT = Path(__file__).resolve().parents[2]
SMALL = CORPUS / "nsys" / "nsys2025.5_flameox_cudagraph.sqlite"
NVPROF = CORPUS / "nvprof" / "nvprof_v18_vectoradd.nvvp"


def run(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pyprof.parse", *args], input=stdin, capture_output=True,
                          env=env, cwd=cwd or ROOT, timeout=120)


def test_parse_writes_json_lines_and_a_summary(corpus):
    p = run(str(SMALL))
    assert p.returncode == 0
    lines = p.stdout.decode().splitlines()
    # parse's header line, 4 records (the export's 3 kernels and a memcpy), then parse's end line, which says how
    # many came before it; the schema is said by the header and the end line, not by each record
    assert len(records_of(lines)) == 4 and json.loads(lines[0])["schema"] == 4 and "schema" not in json.loads(lines[1])
    assert lines[1:5] == records_of(lines)  # the records first; side lines (host time) after them
    assert json.loads(lines[-1]) == {"pyprof_end": True, "schema": 4, "records": 4}
    err = p.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "3 kernels" in err[0] and "attributed to an op" in err[0]
    assert "\r" not in p.stderr.decode()  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize("name", ["lfs_pointer.sqlite", "nvvp_session_xml.nvvp", "pgprof_database.nvvp"])
def test_not_a_profile_one_line_exit_1_nothing_on_stdout(corpus, name):
    path = corpus / "not-a-profile" / name
    p = run(str(path))
    assert p.returncode == 1 and p.stdout == b""
    err = p.stderr.decode().strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert "Traceback" not in p.stderr.decode()


def test_records_given_to_parse_are_named_as_such(tmp_path):
    # issue 44: parse given its own output said "malformed JSON trace (trailing garbage)"
    records = tmp_path / "net.dict"
    p = run("tests/data/graphs/mlp_prewindow.sqlite.xz")
    records.write_bytes(p.stdout)
    p = run(str(records))
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and p.stdout == b"" and len(err) == 1
    assert "already parsed" in err[0] and "pyprof prof FILE" in err[0] and str(records) in err[0]


def test_the_original_pyprofs_output_and_compressed_records_lead_somewhere(corpus, tmp_path):
    # the corpus's net.dict.xz (the original PyProf's dict lines, compressed): parse said "malformed JSON trace" and
    # prof "a profiler export: run pyprof parse": a loop. Each now says what the file is and what to do, in one line
    import lzma

    legacy = corpus / "legacy" / "net.dict.xz"
    plain = tmp_path / "net.dict"
    plain.write_bytes(lzma.decompress(legacy.read_bytes()))
    for path, words in ((plain, ["the original PyProf's output", "`pyprof prof FILE`"]),
                        (legacy, ["the original PyProf's output", "decompress it first"])):
        p = run(str(path))
        err = p.stderr.decode().strip().splitlines()
        assert p.returncode == 1 and p.stdout == b"" and len(err) == 1
        assert all(w in err[0] for w in words), err
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "prof", str(legacy)], capture_output=True, cwd=ROOT)
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and p.stdout == b"" and err == [
        f"pyprof prof: error: {legacy}: records, compressed: decompress it first (xz -dk FILE, gunzip -k FILE)"]
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "prof", str(plain)], capture_output=True, cwd=ROOT)
    assert p.returncode == 0 and b"embedding" in p.stdout  # decompressed, prof reads it (its first op)


def test_truncated_export_refused_before_any_output(corpus, tmp_path):
    data = (corpus / "nsys" / "nsys2026.2_h100_2gpu_torch_nccl.sqlite").read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) * 3 // 4])
    p = run(str(cut))
    assert p.returncode == 1 and p.stdout == b"" and "truncated" in p.stderr.decode()
    assert len(p.stderr.decode().strip().splitlines()) == 1


def test_bad_file_among_several_writes_nothing(corpus):
    p = run(str(SMALL), str(corpus / "not-a-profile" / "lfs_pointer.sqlite"))
    assert p.returncode == 1 and p.stdout == b""


def test_missing_file(tmp_path):
    p = run(str(tmp_path / "nope.sqlite"))
    assert p.returncode == 1 and p.stdout == b"" and "nope.sqlite" in p.stderr.decode()
    assert len(p.stderr.decode().strip().splitlines()) == 1


def test_usage_errors_exit_2():
    assert run().returncode == 2
    p = run("-j", "0", "x")
    assert p.returncode == 2 and p.stdout == b""


def test_no_kernels_is_not_an_error(corpus):
    p = run(str(corpus / "nsys" / "nsys2024.6_no_cuda.sqlite"))
    assert p.returncode == 0 and p.stdout.splitlines()[1:] == [b'{"pyprof_end":true,"schema":4,"records":0}']  # complete, empty
    assert "no GPU kernels" in p.stderr.decode()


def test_stdin(corpus):
    p = run("-", stdin=SMALL.read_bytes())
    assert p.returncode == 0 and len(records_of(p.stdout.decode().splitlines())) == 4  # the export's 4 activities
    assert "<stdin>" in p.stderr.decode()


def test_several_files_in_parallel_same_as_serial(corpus):
    serial = run(str(SMALL), str(NVPROF))
    parallel = run("-j", "2", str(SMALL), str(NVPROF))
    assert serial.returncode == parallel.returncode == 0
    # each input's header line, records (4 and 4) and its own end line
    lines = serial.stdout.decode().splitlines()
    assert serial.stdout == parallel.stdout and len(records_of(lines)) == 8
    assert sum(x.startswith('{"pyprof_header":') for x in lines) == sum(x.startswith('{"pyprof_end":') for x in lines) == 2


def test_output_file_is_written_whole_or_not_at_all(corpus, tmp_path):
    out = tmp_path / "net.dict"
    assert run("-o", str(out), str(SMALL)).returncode == 0
    assert len(records_of(out.read_text().splitlines())) == 4  # the export's 4 activities
    bad = tmp_path / "bad.dict"
    assert run("-o", str(bad), str(corpus / "not-a-profile" / "lfs_pointer.sqlite")).returncode == 1
    assert not bad.exists() and not list(tmp_path.glob(".pyprof-parse-*"))


def test_main_is_callable_without_a_subprocess(corpus, capsys):
    from pyprof.parse.cli import main

    assert main(["-q", str(SMALL)]) == 0
    assert main([str(corpus / "not-a-profile" / "lfs_pointer.sqlite")]) == 1


def test_import_does_not_need_torch():
    code = ("import sys; sys.modules['torch'] = None; import pyprof.parse, pyprof.parse.cli, "
            "pyprof.parse.readers.nsys, pyprof.parse.readers.nvprof, pyprof.parse.readers.kineto; print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.strip() == b"ok", p.stderr.decode()


def test_sweep_worker_on_and_off_write_the_same(corpus):
    path = str(corpus / "nsys" / "nsys2026.2_h100_2gpu_torch_window.sqlite")
    on, off = run("--sweep-process", "on", path), run("--sweep-process", "off", path)
    assert on.returncode == off.returncode == 0
    assert on.stdout == off.stdout and on.stderr == off.stderr and len(on.stdout) > 0
    # The option's old name (prof's --worker picks a process to show) still works until the next release, and
    # says so on stderr.
    old = run("--worker", "on", path)
    assert old.returncode == 0 and old.stdout == on.stdout
    assert old.stderr.decode().startswith("pyprof parse: --worker is deprecated, use --sweep-process\n")


def test_the_renamed_functions_answer_to_their_old_names_with_a_warning(shared):
    import warnings

    import pyprof.parse
    import pyprof.prof
    from pyprof.record import end_line

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs, _stats = pyprof.parse.iter_records(str(SMALL))
        first = next(iter(recs))
        line = first.to_json() + "\n" + end_line(1) + "\n"  # a schema-3 record needs parse's end line after it
        rows = list(pyprof.prof.iter_records(io.BytesIO(line.encode()), "x"))
    assert [str(w.message).split(" is now ")[0] for w in caught] == ["pyprof.parse.iter_records",
                                                                     "pyprof.prof.iter_records"]
    assert all(w.category is DeprecationWarning for w in caught)
    assert rows[0][1]["kShortName"] == first.kShortName


def test_output_to_a_fifo_stays_a_fifo(tmp_path):
    """-o on a pipe or device (/dev/null) writes into it; renaming a temp file over it would replace the node."""
    import stat
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    export = Path(__file__).resolve().parents[1] / "data" / "nsys" / "pyprof" / "lenet.sqlite.xz"
    run = subprocess.run([sys.executable, "-m", "pyprof.parse", str(export), "-o", str(fifo)],
                         capture_output=True, text=True)
    reader.join(timeout=60)
    assert run.returncode == 0, run.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and len(records_of(got[0].splitlines())) == 124  # the export's 124 kernels


def test_worker_refers_to_attributions_it_sent_by_number(monkeypatch):
    """Through the worker, an attribution crosses the pipe once and later launches refer to it by
    number; both sides forget the oldest alike. With a window of 3 and batches of 5 on a real pyprof capture
    (thousands of reuses and evictions), the lines are those of the in-process sweep."""
    from pyprof.parse.readers import activities as model
    from pyprof.parse import close_source, open_source
    from pyprof.parse.attribute import sweep_worker as pipeline
    from pyprof.parse.write.writer import lines

    export = Path(__file__).resolve().parents[1] / "data" / "nsys" / "pyprof" / "transformer.sqlite.xz"
    monkeypatch.setattr(model, "WINDOW", 3)
    monkeypatch.setattr(pipeline, "BATCH", 5)
    out = []
    for worker in (True, False):
        src = open_source(str(export))
        recs, _stats = lines(src, worker)
        out.append(list(recs))
        close_source(src)
    assert len(out[0]) > 500 and out[0] == out[1]
    assert sum('"fwd":{' in line for line in out[0]) > 50  # backward records with their forward op's JSON


@pytest.mark.parametrize("change", ["fewer", "more"])
def test_writer_and_worker_must_read_the_same_launch_calls(change):
    """The writer reads the launch calls itself and joins them to the worker's attributions in order: a
    count that differs is a bug, raised, never a silently shifted join."""
    import itertools

    from pyprof.parse import close_source, open_source
    from pyprof.parse.attribute.sweep_worker import WorkerError, launch_infos_from_worker

    export = Path(__file__).resolve().parents[1] / "data" / "nsys" / "pyprof" / "lenet.sqlite.xz"
    src = open_source(str(export))
    real = src.launches
    if change == "fewer":
        src.launches = lambda: itertools.islice(real(), 1, None)
    else:
        src.launches = lambda: itertools.chain(real(), list(real())[:1])
    try:
        with pytest.raises(WorkerError, match="launch calls"):
            list(launch_infos_from_worker(src, {}))
    finally:
        close_source(src)


def test_an_nsys_report_is_refused_with_the_export_command(tmp_path, capsys):
    from pyprof.parse import cli

    # The first bytes of a real .nsys-rep (NVIDIA/Fuser's report1.nsys-rep, nsys 2025.1).
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 2025@1@1@110-25113545161" + bytes(200))
    assert cli.main([str(rep)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and str(rep) in err and "nsys export --type sqlite" in err
