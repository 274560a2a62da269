"""``pyprof prof --view``: through the console script and ``python -m``, every output format, notes on stderr,
usage errors exit 2."""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys

import pytest
from report_helpers import ROOT

from pyprof.prof.cli import main


@pytest.fixture(scope="module")
def dict_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("views") / "transformer.dict"
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", "tests/data/nsys/pyprof/transformer.sqlite.xz"],
                       capture_output=True, cwd=ROOT, check=True)
    out.write_bytes(p.stdout)
    return out


def _run(args, cli=("python",)):
    cmd = [sys.executable, "-m", "pyprof.prof"] if cli == ("python",) else [shutil.which("pyprof"), "prof"]
    return subprocess.run(cmd + args, capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("cli", [("python",), ("pyprof",)])
def test_view_all(dict_file, cli):
    if cli == ("pyprof",) and not shutil.which("pyprof"):
        pytest.fail("the pyprof console script is not installed (pip install -e .)")
    p = _run(["-v", "--view", "all", str(dict_file)], cli)
    assert p.returncode == 0, p.stderr
    for title in ("# Overview", "# Operators", "# Kernels", "# GPU time per source line", "# Layers",
                  "# Recommendations", "# Workers"):
        assert title in p.stdout
    assert "pyprof prof: overview: " in p.stderr and "pyprof prof: overview: " not in p.stdout


def test_csv_and_jsonl(dict_file):
    p = _run(["--view", "kernels", "--csv", "-q", str(dict_file)])
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0][:3] == ["Kernel", "Calls", "Total (ms)"] and len(rows) > 5
    assert p.stderr == ""
    p = _run(["--view", "lines", "--jsonl", "-q", "--top", "3", str(dict_file)])
    objs = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(objs) == 3 and objs[0]["line"] == "transformer.py:31" and objs[0]["flops"] > 0


def test_recommendations_as_json_lines(dict_file):
    p = _run(["--view", "recommendations", "--jsonl", "-q", str(dict_file)])
    objs = [json.loads(x) for x in p.stdout.splitlines()]
    assert objs and p.returncode == 0
    for o in objs:
        assert list(o) == ["rule", "about", "evidence", "saving_ms", "saving_pct", "action", "time_ms", "time_pct"]
        assert all(isinstance(o[k], (int, float)) for k in ("saving_ms", "saving_pct", "time_ms"))
        # idle time is no GPU time: its share of GPU time is null, the other rules' a number
        idle = o["rule"] in ("launch_bound", "idle_gaps", "sync_copies")
        assert (o["time_pct"] is None) if idle else isinstance(o["time_pct"], (int, float))
    assert [o["saving_ms"] for o in objs] == sorted((o["saving_ms"] for o in objs), reverse=True)
    assert "optimizer" in {o["rule"] for o in objs}


def test_columns_never_wider_than_width(dict_file):
    p = _run(["--view", "recommendations", "-w", "120", "-q", str(dict_file)])
    assert p.returncode == 0
    assert max(len(x) for x in p.stdout.splitlines()) <= 120


def test_usage_errors_exit_2(dict_file, capsys):
    assert main(["--view", "nope", str(dict_file)]) == 2
    assert main(["--view", "overview", "--worker", "123", str(dict_file)]) == 2
    assert main([str(dict_file), str(dict_file)]) == 2  # several files need --view
    assert main(["--view", "overview", "--group-by", "op", str(dict_file)]) == 2
    err = capsys.readouterr().err
    assert "choose one of overview" in err and "no such worker" in err


def test_several_files_are_workers(dict_file, tmp_path):
    other = tmp_path / "rank1.dict"
    other.write_bytes(dict_file.read_bytes())
    p = _run(["--view", "workers", "--jsonl", "-q", str(dict_file), str(other)])
    assert [json.loads(x)["worker"] for x in p.stdout.splitlines()] == ["transformer.dict", "rank1.dict"]
    p = _run(["--view", "overview", "--worker", "rank1.dict", "-q", str(dict_file), str(other)])
    assert p.returncode == 0 and p.stdout.count("ProfilerStep#") == 2


def test_malformed_input_exits_1(tmp_path):
    bad = tmp_path / "bad.dict"
    bad.write_text('{"kind": "kernel"}\nnot a record\n')
    p = _run(["--view", "overview", str(bad)])
    assert p.returncode == 1 and "line 2" in p.stderr and p.stdout == ""


def test_original_pyprof_dict_lines(tmp_path):
    # The original's dict lines: durations but no times or process id; the views still come out.
    line = ("{'kShortName': 'volta_h884gemm_64x64_ldg8_nn', 'kDuration': 1000, 'layer': [], 'trace': [], "
            "'reprMarkers': [], 'marker': [\"{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', "
            "'type': 'tensor', 'shape': (64, 256), 'dtype': 'float16'}, {'name': '', 'type': 'tensor', "
            "'shape': (512, 256), 'dtype': 'float16'}]}\"], 'seqMarker': [], 'seqId': [], 'subSeqId': 0, "
            "'altSeqId': [], 'dir': 'fprop', 'mod': ['torch.nn.functional'], 'op': ['linear'], 'tid': 1, "
            "'device': 0, 'stream': 7, 'grid': (1, 1, 1), 'block': (256, 1, 1)}\n")
    f = tmp_path / "old.dict"
    f.write_text(line * 3)
    p = _run(["-v", "--view", "all", "--jsonl", str(f)])
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    ops = [r for r in rows if r["view"] == "operators"]
    assert ops == [dict(ops[0], op="linear", calls=3, kernels=3, flops=3 * 2 * 64 * 512 * 256)]
    assert "3 activities have no start/end times" in p.stderr
    assert [r["worker"] for r in rows if r["view"] == "workers"] == ["unknown"]
