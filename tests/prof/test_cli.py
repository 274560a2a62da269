"""The command line, run as users run it (python -m pyprof.prof) and through main(argv)."""
from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys

import pytest

from pyprof.prof.cli import main

from .helpers import T, rec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"


def records() -> list[dict]:
    lin = [T([64, 256], "bfloat16"), T([512, 256], "bfloat16"), T([512], "bfloat16")]
    return [
        rec(GEMM, 2000, "linear", "torch.nn.functional", lin, callsite="model.py:10", layer=["enc"],
            trace=["train.py:3", "/src/model.py:10"]),
        rec("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 500, "add",
            "torch", [T([64, 512], "bfloat16"), T([512], "bfloat16")], seq=(2,), callsite="model.py:11"),
        rec("mystery_kernel", 100, "my_op", "torch", [], seq=(3,)),
        {"kind": "memcpy", "kShortName": "Memcpy HtoD", "kDuration": 50, "bytes": 1024, "copy_kind": "HtoD"},
    ]


@pytest.fixture
def dict_file(tmp_path):
    p = tmp_path / "net.dict"
    p.write_text("".join(json.dumps(r) + "\n" for r in records()))
    return str(p)


def prof(*argv, stdin=None):
    return subprocess.run([sys.executable, "-m", "pyprof.prof", *argv], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def test_space_separated_for_awk(dict_file):
    p = prof("-v", "--space", dict_file)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # The original's eight columns in their places (an awk script's $7 is still Params), then what prof is for.
    assert lines[0].split() == ["Idx", "Direction", "Sub", "Module", "Op", "Kernel", "Params", "Time(ns)", "TC",
                                "FLOPs", "TFLOP/s", "Roofline%"]
    assert all(len(line.split(" ")) == 12 for line in lines)  # one field per column, for awk
    gemm = lines[1].split()
    assert gemm[6] == "M=64,N=512,K=256,bf16" and gemm[8] == "yes"
    assert gemm[9] == "16777216" and gemm[10] == "8.389"  # 2*64*512*256 FLOPs in 2000 ns: 8.388608 TFLOP/s
    assert 0 < float(gemm[11]) < 100
    assert lines[3].split()[8:] == ["-", "na", "na", "na"]  # my_op: no formula, so nothing to divide
    assert "modelled for" in p.stderr and "no formula for torch.my_op" in p.stderr


def test_csv_parses_back(dict_file):
    p = prof("--csv", "-c", "idx,op,kernel,params,sil,tc,flops,bytes,roofline,note", dict_file)
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0] == ["Idx", "Op", "Kernel", "Params", "Time(ns)", "TC", "FLOPs", "Bytes", "Roofline%", "Note"]
    assert rows[1][2] == GEMM and rows[1][3] == "M=64,N=512,K=256,bf16" and rows[1][5] == "yes"
    assert rows[1][6] == str(2 * 64 * 512 * 256)
    assert rows[2][5] == "-" and rows[3][6] == "na" and rows[3][9] == "no formula for torch.my_op"
    assert len(rows) == 5


@pytest.mark.parametrize("width,cols", [(40, "idx,dir,sub,mod,op,kernel,params,sil"), (300, "all")])
def test_width_is_respected(dict_file, width, cols):
    p = prof("-w", str(width), "-c", cols, dict_file)
    assert p.returncode == 0, p.stderr
    assert max(len(line) for line in p.stdout.splitlines()) <= width


def test_numbers_are_never_cut(dict_file):
    """Text gives way to fit -w; a number never does (issue 44: an 80-column terminal got a usage error when the
    numbers did not fit): every number of a narrow table is the space-separated table's, whole with --exact, and
    FLOPs and bytes with SI prefixes without it; headers wrap instead of being cut."""
    cols = "idx,op,kernel,params,sil,flops,bytes"
    whole = [line.split() for line in prof("--space", "-c", cols, dict_file).stdout.splitlines()[1:]]
    narrow = prof("-w", "40", "--exact", "--no-header", "-c", cols, dict_file)
    assert narrow.returncode == 0, narrow.stderr
    rows = [line.split() for line in narrow.stdout.splitlines()]
    assert max(len(x) for x in narrow.stdout.splitlines()) <= 40
    assert [r[-3:] for r in rows] == [r[-3:] for r in whole]  # Sil, FLOPs, Bytes whole
    si = prof("-w", "40", "--no-header", "-c", cols, dict_file).stdout.splitlines()
    assert si[0].split()[-2:] == ["16.8M", "361472"]  # the linear's 16,777,216 FLOPs as a person reads them
    p = prof("-w", "100", "-c", "all", dict_file)
    assert p.returncode == 0 and p.stdout


def test_a_width_too_narrow_for_any_table_still_prints_every_row(dict_file):
    p = prof("-w", "5", dict_file)
    assert p.returncode == 0 and p.stdout and not p.stderr.startswith("usage")


def test_stdin_and_dash(dict_file):
    text = open(dict_file).read()
    a, b = prof(stdin=text), prof("-", stdin=text)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout == prof(dict_file).stdout


def test_malformed_line_is_one_message_and_exit_1(dict_file):
    text = open(dict_file).read().splitlines()
    text.insert(2, '{"kind": "kernel", oops')
    p = prof("-", stdin="\n".join(text) + "\n")
    assert p.returncode == 1
    assert p.stdout == ""  # small inputs: nothing half-written
    assert p.stderr.strip().splitlines() == [
        "pyprof prof: error: <stdin>: line 3: not a JSON record nor a PyProf dict line"]


def test_non_object_line(tmp_path):
    f = tmp_path / "x.dict"
    f.write_text("[1, 2]\n")
    p = prof(str(f))
    assert p.returncode == 1 and "line 1" in p.stderr and str(f) in p.stderr


def test_missing_file_and_bad_column():
    assert prof("/nonexistent.dict").returncode == 1
    p = prof("-c", "idx,bogus", "/nonexistent.dict")
    assert p.returncode == 2 and "bogus" in p.stderr


def test_original_pyprof_dict_line(tmp_path):
    line = ("{'kShortName': 'volta_h884gemm_64x64_ldg8_nn', 'kDuration': 1000, 'layer': [], 'trace': [], "
            "'reprMarkers': [], 'marker': [\"{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', "
            "'type': 'tensor', 'shape': (64, 256), 'dtype': 'float16'}, {'name': '', 'type': 'tensor', "
            "'shape': (512, 256), 'dtype': 'float16'}]}\"], 'seqMarker': [], 'seqId': [1], 'subSeqId': 0, "
            "'altSeqId': [], 'dir': 'fprop', 'mod': ['torch.nn.functional'], 'op': ['linear'], 'tid': 1, "
            "'device': 0, 'stream': 7, 'grid': (1, 1, 1), 'block': (256, 1, 1), 'kLongName': 'volta_h884gemm'}")
    f = tmp_path / "old.dict"
    f.write_text(line + "\n")
    p = prof("--csv", "-c", "op,params,tc,flops,grid", str(f))
    assert p.returncode == 0, p.stderr
    assert list(csv.reader(io.StringIO(p.stdout)))[1] == ["linear", "M=64,N=512,K=256,fp16", "yes",
                                                          str(2 * 64 * 512 * 256), "(1,1,1)"]


def test_jsonl_output(dict_file):
    p = prof("--jsonl", "-c", "idx,flops,bytes,tc,note", dict_file)
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    assert rows[0]["flops"] == 2 * 64 * 512 * 256 and rows[2]["flops"] is None and rows[2]["note"]


def test_group_by_op_sorted_by_time_with_top(dict_file):
    p = prof("--group-by", "op", "--csv", "--top", "2", dict_file)
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0][:3] == ["Op", "Count", "Time(ms)"]  # the first column named by what it groups by
    assert [r[0] for r in rows[1:]] == ["linear", "add"]
    assert rows[1][2] == "0.002"  # ms, as the views show time: the one linear kernel's 2000 ns
    assert float(rows[1][8]) == 100.0  # the GEMM ran on Tensor Cores (TC%, after Comm%)
    assert float(rows[1][4]) == 0.0  # Comm%: no NCCL kernel


def test_group_by_layer_says_it_is_self_time(dict_file):
    p = prof("-v", "--group-by", "layer", dict_file)
    assert p.returncode == 0 and "each layer's own time" in p.stderr and "--view layers adds those in" in p.stderr
    assert "each layer's own time" not in prof("-v", "--group-by", "op", dict_file).stderr


def test_help_lists_every_column():
    p = prof("-h")
    from pyprof.prof.table.columns import COLUMNS

    assert p.returncode == 0 and all(f"\n{c} " in p.stdout for c in COLUMNS)


def test_plugin_registers_a_user_op(tmp_path, dict_file):
    plugin = tmp_path / "my_ops.py"
    plugin.write_text(
        "from pyprof.prof import register, estimate\n"
        "@register('torch.my_op', family='pointwise')\n"
        "def my_op(a):\n"
        "    '''my_op: 1 FLOP, 8 bytes (a test).'''\n"
        "    return estimate(1, [(2, 'float32')], 'mine')\n")
    p = prof("--plugin", str(plugin), "--csv", "-c", "op,params,flops,bytes", dict_file)
    assert p.returncode == 0, p.stderr
    assert list(csv.reader(io.StringIO(p.stdout)))[3] == ["my_op", "mine", "1", "8"]


def test_plugin_cannot_silently_replace_a_builtin(tmp_path, dict_file):
    plugin = tmp_path / "dup.py"
    plugin.write_text("from pyprof.prof import register\n@register('torch.mm')\ndef mine(a):\n    pass\n")
    p = prof("--plugin", str(plugin), dict_file)
    assert p.returncode == 2 and "already registered" in p.stderr and "mm" in p.stderr


def test_main_in_process(dict_file, capsys):
    assert main(["-q", "-c", "idx,flops", dict_file]) == 0


def test_import_does_not_import_torch():
    code = "import sys; sys.modules['torch'] = None; import pyprof.prof, pyprof.prof.cli; print('ok')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.stdout.strip() == "ok", p.stderr


def test_docs_name_every_column_and_formula():
    from pyprof.prof.model import registry
    from pyprof.prof.table.columns import COLUMNS

    prof_md = open(os.path.join(ROOT, "docs", "prof.md")).read()
    formulas_md = open(os.path.join(ROOT, "docs", "formulas.md")).read()
    assert all(f"| `{c}` |" in prof_md for c in COLUMNS)
    missing = [f.fn.__name__ for f in registry.formulas() if f"`{f.fn.__name__}`" not in formulas_md]
    assert not missing, f"docs/formulas.md does not describe {missing}"
    from pyprof.prof.catalogue import catalogue

    assert formulas_md.endswith(catalogue()), "regenerate docs/formulas.md's catalogue: python -m pyprof.prof.catalogue"


def test_strict_fails_on_unmodelled_kernels(dict_file):
    p = prof("--strict", "-q", dict_file)
    assert p.returncode == 1 and "my_op" in p.stderr


def test_record_with_fields_of_wrong_types_is_bad_input():
    p = prof("-", stdin='{"kShortName": "k", "tid": [1], "op": ["add"], "mod": ["torch"], "args": []}\n')
    assert p.returncode == 1 and p.stdout == "" and "line 1" in p.stderr and "Traceback" not in p.stderr


# -- Output: nothing on stdout unless the whole input was good; a full disk is one line --------------------------

def test_spool_holds_everything_until_publish(tmp_path, monkeypatch):
    from pyprof.prof.cli import Spool

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    target = io.StringIO()
    s = Spool(target)
    s.MEMORY_CHARS = 10  # the text moves to the temporary file at the second checkpoint
    s.write("0123")
    s.commit()
    s.write("456789abcdef\n")
    s.commit()
    s.write("tail\u00e9\n")
    assert target.getvalue() == "" and os.listdir(tmp_path) == []  # an unnamed temporary: nothing to leave behind
    s.publish()
    assert target.getvalue() == "0123456789abcdef\ntail\u00e9\n"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_malformed_line_after_many_rows_leaves_stdout_empty(tmp_path, jobs):
    # 70k rows: more than one 64k-row checkpoint before the bad line (with workers, many chunks).
    line = json.dumps(records()[2]) + "\n"
    path = tmp_path / "net.dict"
    path.write_text(line * 70_000 + "not a record\n")
    p = prof("-q", "-j", jobs, str(path))
    assert p.returncode == 1 and p.stdout == "" and p.stderr.count("\n") == 1 and "line 70001" in p.stderr


def test_full_disk_is_one_line_and_the_device_stays(tmp_path, dict_file):
    full = tmp_path / "full"
    try:  # a private node of /dev/full's device: never the machine's own, which a rename could replace
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except OSError:
        pytest.skip("mknod not allowed here")
    with open(full, "w") as out:
        p = subprocess.run([sys.executable, "-m", "pyprof.prof", dict_file], stdout=out, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 1
    assert p.stderr == "pyprof prof: error: <stdout>: could not write the output (No space left on device)\n"
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_a_message_is_one_printable_line(tmp_path):
    # A message names the file: a name holding an escape sequence and a line break, in a path of 2,400 characters.
    path = str(tmp_path / (("x" * 200 + "/") * 12) / "net\x1b[2J\n.dict")
    p = prof("-q", path)
    assert p.returncode == 1 and p.stdout == "" and p.stderr.count("\n") == 1 and "\x1b" not in p.stderr
    # The path cut in its middle: where it starts and the file's name stay, and what was wrong.
    assert p.stderr.startswith("pyprof prof: error: " + str(tmp_path))
    assert p.stderr.endswith("xxx/net\\x1b[2J\\n.dict: cannot open: No such file or directory\n")
    assert len(p.stderr) < 600


def test_the_helps_first_examples_show_flops_roofline_and_tensor_cores(dict_file):
    """The typical commands of -h (the first two prof examples, per op and per kernel) show what prof is for."""
    from pyprof.prof.cli import build_parser

    examples = build_parser().format_help().split("examples:\n", 1)[1].splitlines()
    typical = [line.split("#")[0].split() for line in examples if line.strip().startswith("pyprof prof")][:2]
    assert [t[-1] for t in typical] == ["net.dict", "net.dict"]
    for argv in typical:
        p = prof(*argv[2:-1], dict_file)
        assert p.returncode == 0, (argv, p.stderr)
        header = p.stdout.splitlines()[0].split()
        assert {"FLOPs", "TFLOP/s", "Roofline%"} <= set(header) and ("TC" in header or "TC%" in header), argv


def _last_four(p, fmt: str) -> dict:
    """{group: its FLOPs, TFLOP/s, Roofline% and TC% as printed} of a grouped table (the last four columns of
    --group-by op and --view operators alike)."""
    if fmt == "--jsonl":
        rows = [json.loads(line) for line in p.stdout.splitlines()]
        return {(r.get("key") or r.get("op")): list(r.values())[-4:] for r in rows}
    if fmt == "--csv":
        rows = list(csv.reader(io.StringIO(p.stdout)))[1:]
    else:
        rows = [line.split() for line in p.stdout.splitlines()[1:]]  # no spaces inside these keys
    return {r[0]: r[-4:] for r in rows}


@pytest.mark.parametrize("fmt", ["--space", "--csv", "-w100 --exact", "--jsonl"])
@pytest.mark.parametrize("command", [["--group-by", "op"], ["--view", "operators"]])
def test_a_group_with_nothing_modelled_is_na_not_zero(dict_file, fmt, command):
    """my_op has no formula, the copy has no FLOPs and no GPU to take a bandwidth from, and neither can use Tensor
    Cores: their TFLOP/s, Roofline% and TC% are unknown or not applicable (na, null), never a 0 that reads as
    '0% efficient'; a copy's FLOPs are a modelled 0, my_op's unknown."""
    p = prof("-q", *fmt.split(), *command, dict_file)
    assert p.returncode == 0, p.stderr
    got = _last_four(p, fmt)
    na = None if fmt == "--jsonl" else "na"
    zero = 0 if fmt == "--jsonl" else "0"
    assert got["my_op"] == [na, na, na, na]
    assert got["memcpy"] == [zero, na, na, na]
    assert got["add"][3] == na  # a pointwise add: Tensor Cores do not apply
    # The GEMM is modelled: 2*64*512*256 = 16777216 FLOPs in 2000 ns = 8.389 TFLOP/s, all on Tensor Cores.
    flops, tflops, roof, tc = got["linear"]
    assert int(flops) == 16777216 and round(float(tflops), 3) == 8.389 and float(tc) == 100.0
    # Bytes (64*256 + 512*256 + 512 + 64*512) * 2 = 361472 at the H200's 4800 GB/s: 75.3 ns, longer than the
    # FLOPs at its 989.5 bf16 TFLOP/s (17 ns): 75.3 / 2000 = 3.765%.
    assert abs(float(roof) - 3.765) < 0.01


@pytest.mark.parametrize("as_string", [True, False])
def test_mod_and_op_given_as_one_string_are_names(tmp_path, as_string):
    # docs/record.md: mod and op (a record's, its forward link's) may be one string: the name, not its letters.
    def names(v):
        return v if as_string else [v]

    recs = [dict(rec("k", 1000, dir="bprop", fwd={"op": names("linear"), "mod": names("torch.nn.functional")}),
                 op=names("mm"), mod=names("aten")),
            dict(rec("k2", 1000, seq=(2,)), op=names("relu"), mod=names("torch"))]
    path = tmp_path / "s.dict"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    rows = prof("-q", "--jsonl", "-c", "mod,op", str(path))
    assert [json.loads(line) for line in rows.stdout.splitlines()] == [{"mod": "aten", "op": "mm"},
                                                                        {"mod": "torch", "op": "relu"}]
    for command in (["--group-by", "op"], ["--view", "operators"]):
        p = prof("-q", "--csv", *command, str(path))
        assert p.returncode == 0, p.stderr
        assert sorted(r[0] for r in list(csv.reader(io.StringIO(p.stdout)))[1:]) == ["linear (bprop)", "relu"]
