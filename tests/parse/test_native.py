"""The compiled core (pyprof.parse._core) and the pure-Python path write the same bytes, or refuse with the same
line, for every committed capture and every shared nsys and NvProf export; without the core, parse runs the Python
path. The rest of the parse tests run whichever path the environment gives (the core where it is built)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pyprof.common import InputError
from pyprof.parse.write import native, native_lines
from pyprof.parse import open_source, close_source
from pyprof.parse.readers.sqlrows import as_is

from parse_synth import CORPUS, parse_outcome

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "tests" / "data").rglob("*.sqlite.xz")) + sorted((ROOT / "examples").rglob("*.sqlite.xz"))
SHARED_KINDS = ("nsys", "nvprof", "not-a-profile")
SHARED = [CORPUS / kind / name for kind in SHARED_KINDS
          for name in (sorted(p.name for p in (CORPUS / kind).iterdir()) if (CORPUS / kind).is_dir() else [])]
EMIT_NVTX = ROOT / "tests" / "data" / "nsys" / "emit_nvtx" / "transformer.sqlite.xz"
needs_core = pytest.mark.skipif(native._core is None, reason="the compiled core is not built (no compiler or sqlite3.h)")


def _outcome(path: Path, pure: bool, monkeypatch, raw_markers: bool = False) -> tuple:
    """(the output, the Stats' counts) of a parse, or the error's line."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    return parse_outcome(path, raw_markers)


@needs_core
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_captures_same_bytes_both_paths(path, monkeypatch):
    assert _outcome(path, False, monkeypatch) == _outcome(path, True, monkeypatch)


@needs_core
@pytest.mark.parametrize("path", SHARED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_exports_same_outcome_both_paths(corpus, path, monkeypatch):
    assert _outcome(path, False, monkeypatch) == _outcome(path, True, monkeypatch)


@needs_core
def test_raw_markers_same_bytes_both_paths(monkeypatch):
    assert _outcome(EMIT_NVTX, False, monkeypatch, True) == _outcome(EMIT_NVTX, True, monkeypatch, True)


@needs_core
@pytest.mark.parametrize("name, taken", [("nsys/emit_nvtx/transformer.sqlite.xz", True),
                                         ("nsys/pyprof/transformer.sqlite.xz", True),
                                         ("graphs/cuda_graph_all.sqlite.xz", False)])  # graph nodes
def test_which_exports_the_core_takes(name, taken, monkeypatch):
    _takes(ROOT / "tests" / "data" / name, taken, monkeypatch)


@needs_core
def test_ranges_with_json_payloads_take_the_python_path(tmp_path, monkeypatch):
    from nsys_schema import Export2026

    e = Export2026(tmp_path / "payload.sqlite")
    e.range(100, 900, "aten::mm, seq = 3, op_id = 7", json_text='{"sizes": [[2, 3], [3, 4]]}')
    e.launch(200, 300, 1, 400)
    _takes(e.close(), False, monkeypatch)


def _takes(path: Path, taken: bool, monkeypatch) -> None:
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    src = open_source(str(path))
    try:
        assert native_lines.takes(src) is taken
        monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
        assert native_lines.takes(src) is False
    finally:
        close_source(src)


@needs_core
def test_odd_ranges_same_bytes_both_paths(nsys_builder, monkeypatch):
    """What the core hands back to Python or reads leniently (_odd_ranges)."""
    path, n_edges = _odd_ranges(nsys_builder())
    c_path, py_path = _outcome(path, False, monkeypatch, True), _outcome(path, True, monkeypatch, True)
    assert c_path == py_path
    # 10 launches of the first threads + one per edge text; oddities: deep ranges and a text that is not UTF-8
    assert c_path[1]["records"] == 10 + n_edges and c_path[1]["oddities"]


def _odd_ranges(b) -> tuple[Path, int]:
    """An export of what the core hands back to Python or reads leniently: ranges nested past MAX_RANGE_DEPTH,
    equal starts (the later end encloses), texts that are not ASCII or not UTF-8 with a seq, odd spacing after
    "seq =", a backward node inside the engine's range and a numbered range right inside it, a consumer op naming a
    waiting producer, and texts at the edges of the core's emit_nvtx decoding (a newline, a number past 64 bits,
    fields out of the common order or spacing); (its path, the number of edge texts)."""
    from pyprof.parse.attribute.correlate import MAX_RANGE_DEPTH

    b.gpu(0, "NVIDIA H100")
    t = 1000
    for i in range(MAX_RANGE_DEPTH + 5):  # one thread nested too deep: the deepest are left out, counted
        b.range(1, 1, t + i, 900_000 - i, f"level {i}")
    b.range(1, 2, 2000, 5000, "aten::linear, seq = 7, op_id = 1")
    b.range(1, 2, 2000, 9000, "aten::mm, seq = 8, op_id = 2")  # equal start, later end: encloses
    b.range(1, 2, 2100, 4000, "aten::addmm, seq = 9, op_id = 3, sizes = [[2, 3], [3, 4]], input_op_ids = [(0,-1)]")
    b.range(1, 2, 2200, 3900, "aten::conv2d, seq = 10, op_id = 4, sizes = [[1, 3, 8, 8]], input_op_ids = [(0,-1)]")
    b.range(1, 2, 3000, 3500, "aten::relu, seq = 11, op_id = 5, sizes = [[1, 3, 8, 8]], input_op_ids = [(4,0)]")
    b.range(1, 2, 10_000, 11_000, "aten::ümlaut, seq = 12, op_id = 6")
    b.range(1, 2, 12_000, 13_000, "aten::spaced, seq =  13 , op_id = 7")
    b.range(1, 3, 20_000, 40_000, "autograd::engine::evaluate_function: MmBackward0, op_id = 9")
    b.range(1, 3, 20_100, 30_000, "MmBackward0, seq = 8, op_id = 10")
    b.range(1, 3, 20_200, 29_000, "aten::mm, seq = 8, op_id = 11")
    b.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                 "VALUES (14000, 15000, 59, CAST(x'61746e3a3a6d6d2c20736571203d20ff2c206f705f6964203d2038' AS TEXT), "
                 "?, 0)", ((1 << 24) | 2,))
    # texts at the edges of the core's own emit_nvtx decoding (markers._decode_emit_nvtx decides the rest)
    edges = ["aten::nl, seq = 14, op_id = 12, sizes = [[2,\n3]]", "aten::big, seq = 123456789012345678901, op_id = 13",
             "aten::word, seq = abc, op_id = 14", "aten::in, seq = 15, input_op_ids = [(1,0)]",
             "aten::st, seq = 16, op_id = 15, stashed seq = 3", "aten::eq, seq = 17, sizes = [[1]] = 2",
             "aten::tail, op_id = 16, sizes = [[4, 4]] , input_op_ids =  [(3,0)] ", "t=1", "layer:block.0",
             '{"pyprof":1,"mod":"torch","op":"matmul","args":[],"site":"x.py:3"}']
    for i, text in enumerate(edges):
        b.range(1, 4, 50_000 + i * 1000, 50_500 + i * 1000, text)
    for corr, (tid, start) in enumerate([(1, 1500), (2, 2050), (2, 2150), (2, 2250), (2, 3100), (2, 10_100),
                                         (2, 12_100), (2, 14_100), (3, 20_300), (3, 35_000)]
                                        + [(4, 50_100 + i * 1000) for i in range(len(edges))], start=1):
        b.launch(1, tid, start, start + 50, corr)
        b.kernel(1, 100_000 + corr * 1000, 100_500 + corr * 1000, corr)
    return b.close(), len(edges)


@needs_core
def test_nesting_depth_in_c_answers_as_the_python_walk():
    """native.deeper_than (a JSON marker's containers walked in C) against markers._deeper_than, the reference, on
    random nestings of every container the check descends into (JSON's dicts and lists; the literal path's tuples,
    sets and frozensets), at limits around their depths, and on a real optimizer marker."""
    import random

    from pyprof.parse.attribute import markers as mk

    rng = random.Random(5)

    def value(depth: int):
        if depth > 12 or rng.random() < 0.3:
            return rng.choice([1, "s", 2.5, None, True, (), frozenset()])
        items = [value(depth + 1) for _ in range(rng.randrange(4))]
        kind = rng.randrange(5)
        hashable = [x for x in items if _hashable(x)]
        return (items, tuple(items), {str(i): x for i, x in enumerate(items)}, set(hashable),
                frozenset(hashable))[kind]

    def _hashable(x) -> bool:
        try:
            hash(x)
        except TypeError:
            return False
        return True

    answers = [(mk._deeper_than(v, limit), native.deeper_than(v, limit))
               for v in ({"x": value(0)} for _ in range(3000)) for limit in (0, 1, 2, 3, 5, 8, 16)]
    assert all(py == c for py, c in answers)
    assert 0.2 < sum(py for py, _ in answers) / len(answers) < 0.8  # both answers are common
    foreach = {"op": "_foreach_div_", "args": [{"type": "tensorlist", "items": [{"shape": [4, 4]}] * 100}]}
    assert [native.deeper_than(foreach, k) for k in (5, 6)] == [mk._deeper_than(foreach, k) for k in (5, 6)] \
        == [True, False]  # dict, args list, tensorlist dict, items list, tensor dict, shape list: 6 levels


@needs_core
def test_host_line_lists_written_in_c_as_json_writes_them():
    """native.int64_json against json.dumps of the same numbers as a list: the ends of 64 bits, zero, each digit count,
    random values of either sign, strided views (what host.Packed.bounds hands over) and an empty run; then whole host
    lines, with and without names, through record.host_line both ways."""
    import json
    import random

    import numpy as np

    from pyprof.record import host_line

    rng = random.Random(11)
    edges = [0, 1, -1, 9, 10, -10, 2 ** 63 - 1, -2 ** 63, -(2 ** 63 - 1)] + [10 ** k for k in range(19)]
    samples = [np.array(edges, dtype=np.int64), np.array([], dtype=np.int64)]
    samples += [np.array([rng.randrange(-2 ** 63, 2 ** 63) for _ in range(rng.randrange(1, 300))], dtype=np.int64)
                for _ in range(50)]
    times = np.arange(0, 4000, 7, dtype=np.int64)
    samples += [times[0::2], times[1::2], times[::-3]]
    to_json = native.int64_json()
    for a in samples:
        assert to_json(a) == json.dumps(a.tolist(), separators=(",", ":"))
    for pid, names in ((4242, None), (None, ["ProfilerStep#1", "ProfilerStep#2 \u00e9\"x"])):
        lo, hi = np.array([5, 17], dtype=np.int64), np.array([9, 30], dtype=np.int64)
        assert host_line(pid, "step", lo, hi, names, to_json) == host_line(pid, "step", [5, 17], [9, 30], names)
    with pytest.raises(TypeError):
        to_json(np.array([1.5]))
    with pytest.raises(TypeError):
        to_json(np.zeros((2, 2), dtype=np.int64))


def _marker_view(m) -> tuple | None:
    """What parse reads of a decoded Marker (its fields, its data, its two JSON texts)."""
    if m is None:
        return None
    return (m.kind, m.name, m.mod, m.op, m.args, m.site, m.stack, m.data, m.args_json(), m.lean_json(None),
            m.lean_json(7))


@needs_core
def test_split_marker_args_decode_as_the_whole_text(monkeypatch):
    """A long JSON marker decoded in pieces (_core.split_args: its "args" list's elements, each decoded once) gives
    what decoding the whole text gives (markers.split_args None: the reference), field for field and in its JSON, on
    texts made to be split wrongly: duplicate or escaped "args" keys, brackets, commas and quotes in strings, nested
    "args" keys, non-finite numbers, elements at the nesting limit and one past it, legacy Python literals, and
    thousands of random one-character edits of them (most no JSON, some JSON of another meaning)."""
    import json
    import random

    from pyprof.parse.attribute import markers as mk

    pad = {"type": "tensorlist", "items": [{"type": "tensor", "shape": [1024, i], "dtype": "bfloat16"}
                                           for i in range(40)]}
    padded = json.dumps(pad, separators=(",", ":"))
    assert len(padded) > mk.SPLIT_MIN_CHARS  # every text below is long enough to be split

    def deep(levels: int) -> str:  # an element nesting `levels` lists
        return "[" * levels + "1" + "]" * levels

    bases = [
        '{"pyprof":1,"mod":"torch","op":"_foreach_add_","args":[%s,{"type":"float","value":0.5}],"site":"a.py:3"}',
        '{"pyprof":1,"op":"x","args":[%s , "s,]\\\"[{" ,{"args":[1,2]}, NaN, -Infinity, 1e999, 12345678901234567890]}',
        '{"pyprof":1,"op":"x","args":[%s],"args":[1]}',
        '{"pyprof":1,"op":"x","ar\\u0067s":[1],"args":[%s]}',
        '{"pyprof":1,"op":"x","args":{"a":%s}}',
        '{"pyprof":1,"op":"x","args":[%s]}  \n ',
        '{"pyprof":1,"op":"x","args":[%s]} trailing',
        '  {"pyprof":1,"op":"x","args":[ %s ],"stack":["f.py:1","g.py:2"]}',
        "{'pyprof': 1, 'op': 'x', 'args': [%s, (1, 2)]}",
        '{"mod":"torch","op":"legacy","args":[%s,{"name":"x","shape":[2]}]}',
        '{"pyprof":1,"op":"x","args":[%s,' + deep(14) + "]}",  # 16 levels with the dict and the list: kept
        '{"pyprof":1,"op":"x","args":[%s,' + deep(15) + "]}",  # 17: too deep, no marker
        '{"pyprof":1,"op":"\u00e9","args":[%s]}',
    ]
    texts = [b % padded for b in bases]
    rng = random.Random(11)
    alphabet = '[]{},:"\\ aN-.e' + "0123456789" + " " * 6  # digits and spaces keep many texts JSON
    for _ in range(3000):
        t = list(rng.choice(texts))
        at = rng.randrange(len(t))
        edit = rng.randrange(3)
        if edit == 0:
            del t[at]
        elif edit == 1:
            t.insert(at, rng.choice(alphabet))
        else:
            t[at] = rng.choice(alphabet)
        texts.append("".join(t))
    whole, pieces = [], []
    for t in texts:
        monkeypatch.setattr(mk, "split_args", None)
        whole.append(_marker_view(mk._decode_dict(t)))
        monkeypatch.setattr(mk, "split_args", native.split_args)
        pieces.append(_marker_view(mk._decode_dict(t)))
    assert pieces == whole
    split = [native.split_args(t) is not None for t in texts]
    # both ways were taken often: split texts that are markers, and split texts whose pieces the whole text overrules
    assert sum(s and m is not None for s, m in zip(split, whole)) > 150
    assert sum(s and m is None for s, m in zip(split, whole)) > 300
    assert [m is not None for m in whole[10:12]] == [True, False]  # the nesting limit, on both sides


@needs_core
def test_python_sweep_on_the_compiled_feed(nsys_builder, monkeypatch):
    """The Python sweep (exports the core leaves to Python: CUDA graphs, launch sites) reads its ranges through the
    compiled feed, whose stacks are kept in C and whose lists are made up to date before each attribution: the same
    infos as with the Python feed (RowFeed), on the odd ranges."""
    from pyprof.parse.attribute import correlate

    path, _ = _odd_ranges(nsys_builder())
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
    swept = {}
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(native, "range_feed", lambda *args: None)
        src = open_source(str(path))
        try:
            oddities: dict = {}
            infos = list(correlate.Correlator(src, oddities).sweep(src.launch_times()))
        finally:
            close_source(src)
        numbers: dict = {}  # attribution numbers count on across sweeps: renumbered by first use
        swept[compiled] = ([(None if i is None else (numbers.setdefault(i[0], len(numbers)), i[1]), call, flags)
                            for i, call, flags in infos], oddities)
    assert swept[True] == swept[False]
    # 10 launches of the first threads and one per edge text, every one attributed; the deep ranges counted
    assert len(swept[True][0]) == 20 and all(i is not None for i, _, _ in swept[True][0])
    assert swept[True][1] == {correlate.DEEP_RANGES: 5}


@needs_core
@pytest.mark.parametrize("ahead", ["0", "1"])
def test_core_sweep_worker_same_as_in_process(nsys_builder, monkeypatch, ahead):
    """The core's sweep in a worker process: the same lines, and the same counts of what was left out or read
    leniently (the worker's oddities are added to the parent's at the end), as swept in the parsing process."""
    from pyprof.parse.write.writer import lines

    path, _ = _odd_ranges(nsys_builder())
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
    monkeypatch.setenv(native.READ_AHEAD_ENV, ahead)
    out = {}
    for worker in (True, False):
        src = open_source(str(path))
        try:
            recs, stats = lines(src, worker, raw_markers=True)
            out[worker] = (list(recs), vars(stats))
        finally:
            close_source(src)
    assert out[True] == out[False] and out[True][1]["oddities"]


@needs_core
def test_recent_launches_kept_and_dropped_alike(nsys_builder, monkeypatch):
    """The writer's recent launches (a kernel that shares its launch call with one written before) with RECENT = 2,
    so at most 4 kept and the oldest 2 dropped at once: launches 1-6 each start a kernel (1 and 2 dropped when 5 is
    added), a second kernel of launch 3 still finds it; launch 7 drops 3 and 4, so a second kernel of 4 finds
    nothing and one of 5 finds it. Both paths: 10 records, 1 without its launch call."""
    from pyprof.parse.write import lineparts, writer

    monkeypatch.setattr(lineparts, "RECENT", 2)
    monkeypatch.setattr(writer, "RECENT", 2)
    b = nsys_builder()
    b.gpu(0, "NVIDIA H100")
    b.range(1, 2, 0, 100_000, "aten::mm, seq = 1, op_id = 1")
    for corr in range(1, 8):
        b.launch(1, 2, corr * 1000, corr * 1000 + 50, corr)
        b.kernel(1, corr * 1000 + 500, corr * 1000 + 600, corr)
    for corr, start in ((3, 6700), (4, 7700), (5, 7800)):
        b.kernel(1, start, start + 50, corr)
    path = b.close()
    c_path, py_path = _outcome(path, False, monkeypatch), _outcome(path, True, monkeypatch)
    assert c_path == py_path
    assert c_path[1]["records"] == 10 and c_path[1]["no_launch"] == 1
    # by start: launches 1-6's kernels, 3's second, 7's, 4's second (no launch call: no thread), 5's second
    lines = [ln for ln in c_path[0].splitlines() if '"kind":"kernel"' in ln]
    assert [('"tid":null' in ln) for ln in lines] == [False] * 8 + [True, False]


@needs_core
@pytest.mark.parametrize("worker", [True, False])
def test_sqlite_error_part_way_through_the_sweep(monkeypatch, worker):
    """SQLite failing in the middle of the ranges' query (an integer overflow from the 100th range on, made in the
    query itself): the same one line, swept in the parsing process or in the worker, read ahead or not."""
    from pyprof.parse.write.writer import lines

    monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
    errors = set()
    for ahead in ("0", "1"):
        monkeypatch.setenv(native.READ_AHEAD_ENV, ahead)
        src = open_source(str(EMIT_NVTX))
        real = src.range_query()
        cut = sorted(start for _, start, *_ in src.ranges())[100]
        overflow = as_is(f"e.globalTid + CASE WHEN e.start > {cut} THEN abs(-9223372036854775807 - 1) ELSE 0 END")
        src.range_query = lambda: replace(real, columns=(overflow,) + real.columns[1:])
        try:
            with pytest.raises(InputError) as e:
                list(lines(src, worker)[0])
            errors.add(str(e.value))
        finally:
            close_source(src)
    assert len(errors) == 1 and "integer overflow" in errors.pop()


@needs_core
def test_strings_read_as_the_python_path_reads_them(nsys_builder, monkeypatch):
    """An export without GPU work whose StringIds hold a text that is not UTF-8: the Python path never reads the
    strings, so neither may the core (it read them for its parts up front, and counted the oddity alone)."""
    b = nsys_builder()
    b.range(1, 1, 1000, 2000, "aten::mm, seq = 1, op_id = 1")
    b.db.execute("INSERT INTO StringIds VALUES (99, CAST(x'6b65726e656cff' AS TEXT))")
    for table in ("KERNEL", "MEMCPY", "RUNTIME"):  # an export of CPU work only (nsys without CUDA tracing)
        b.db.execute(f"DROP TABLE CUPTI_ACTIVITY_KIND_{table}")
    path = b.close()
    c_path, py_path = _outcome(path, False, monkeypatch), _outcome(path, True, monkeypatch)
    assert c_path == py_path


_WITHOUT_CORE = """
import io, sys
sys.modules["pyprof.parse._core"] = None  # as if it were never built: importing it raises ImportError
from pyprof.parse.write import native
from pyprof.parse import parse_file
assert native._core is None and not native.enabled()
out = io.StringIO()
parse_file(sys.argv[1], out)
sys.stdout.write(out.getvalue())
"""


def test_parse_runs_without_the_core(monkeypatch):
    """The extension blocked from importing: the Python path, and (where the core is built) the same bytes."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(native.PURE_PYTHON_ENV, None)
    done = subprocess.run([sys.executable, "-c", _WITHOUT_CORE, str(EMIT_NVTX)], env=env, capture_output=True,
                          text=True, check=True)
    assert done.stdout.count("\n") > 400  # header, 538 records, end line
    if native._core is not None:
        assert done.stdout == _outcome(EMIT_NVTX, False, monkeypatch)[0]


_CLI_WITHOUT_CORE = """
import sys
sys.modules["pyprof.parse._core"] = None  # as if it were never built
from pyprof.parse.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_parse_without_the_core_says_so_once(tmp_path):
    # issue 44: an install without a C compiler took the slower path silently; the summary now says it, and what
    # to install (switched off on purpose, PYPROF_PURE_PYTHON=1, it says nothing)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(native.PURE_PYTHON_ENV, None)
    out = str(tmp_path / "r.dict")
    done = subprocess.run([sys.executable, "-c", _CLI_WITHOUT_CORE, str(EMIT_NVTX), "-o", out], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert "parsed without the compiled core" in line and "C compiler" in line
    chosen = subprocess.run([sys.executable, "-m", "pyprof.parse", str(EMIT_NVTX), "-o", out],
                            env=dict(env, **{native.PURE_PYTHON_ENV: "1"}), capture_output=True, text=True)
    assert chosen.returncode == 0 and "compiled core" not in chosen.stderr


@needs_core
def test_sweep_worker_same_bytes_both_paths(monkeypatch):
    """With the sweep in a worker process, the core's writer takes attributions by number as the Python writer does:
    with a window of 3 and batches of 5 (thousands of reuses and evictions), all four ways give the same lines."""
    from pyprof.parse.readers import activities
    from pyprof.parse.attribute import sweep_worker
    from pyprof.parse.write.writer import lines

    monkeypatch.setattr(activities, "WINDOW", 3)
    monkeypatch.setattr(sweep_worker, "BATCH", 5)
    out = {}
    for pure in ("0", "1"):
        monkeypatch.setenv(native.PURE_PYTHON_ENV, pure)
        for worker in (True, False):
            src = open_source(str(ROOT / "tests" / "data" / "nsys" / "pyprof" / "transformer.sqlite.xz"))
            assert native_lines.takes(src) is (pure == "0")
            recs, stats = lines(src, worker)
            out[pure, worker] = (list(recs), vars(stats))
            close_source(src)
    first = out["0", True]
    assert len(first[0]) > 500 and all(o == first for o in out.values())


@needs_core
def test_times_at_the_ends_of_64_bits_same_bytes_both_paths(nsys_builder, monkeypatch):
    """A duration past 64 bits and a start whose clock-skew horizon passes them: both paths give the same lines.
    The kernel whose duration passes 64 bits is left out and counted (issue 40: prof refuses a record integer past
    64 bits, so parse writes none); the others are written exactly, never wrapped."""
    b = nsys_builder()
    low, high = -(1 << 63) + 5, (1 << 63) - 5
    b.launch(1, 1, low, low + 10, 1)
    b.kernel(1, low + 20, high, 1)  # lasts 2**64 - 25 ns
    b.launch(1, 1, high - 100, high - 90, 2)
    b.kernel(1, high - 50, high - 40, 2)  # its start + the clock skew passes 2**63
    b.launch(1, 1, -(1 << 63), -(1 << 63) + 2, 3)  # the one int64 whose negation is no int64
    b.kernel(1, -(1 << 63) + 3, -(1 << 63) + 4, 3)
    path = b.close()
    c_path = _outcome(path, False, monkeypatch)
    assert c_path == _outcome(path, True, monkeypatch)
    assert f'"kDuration":{high - low - 20},' not in c_path[0]
    assert c_path[0].count('"kind":"kernel"') == 2  # of 3: the one lasting 2**64 - 25 ns is left out, counted
    assert c_path[1]["oddities"] == {"kernel rows with a start, end or id that is not an integer (or ends before "
                                     "it starts, or 2^63 ns or more after it), left out": 1}
    assert f'{-(1 << 63)},' in c_path[0] and f'{-(1 << 63) + 3},' in c_path[0]


@needs_core
@pytest.mark.parametrize("ahead", ["0", "1"])
def test_values_of_every_type_read_in_c_as_sql_reads_them(nsys_builder, monkeypatch, ahead):
    """The core makes its queries' type tests in C (sqlrows.Query.plain), the Python path in SQL (Query.sql). Each
    value they test holds, in some row, a type other than an integer (or text): the same records, and the rows left
    out are the ones broken here, counted by hand below."""
    b = nsys_builder()
    b.gpu(0, "NVIDIA H100")
    b.db.execute("ALTER TABLE NVTX_EVENTS ADD COLUMN uint64Value INTEGER")
    for i in range(1, 13):
        t = i * 10_000
        b.range(1, 1, t, t + 900, f"aten::op{i}, seq = {i}, op_id = {i}")
        b.launch(1, 1, t + 100, t + 150, i)
        b.kernel(1, 500_000 + t, 500_500 + t, i)
    for i in (13, 14):
        b.launch(1, 1, i * 10_000 + 100, i * 10_000 + 150, i, api="cudaMemcpyAsync_v3020")
        b.memcpy(1, 500_000 + i * 10_000, 500_500 + i * 10_000, i, 4096)
    registered, not_text = b.string("aten::registered, seq = 5, op_id = 5"), b.string("placeholder")
    b.db.execute("UPDATE StringIds SET value = x'00' WHERE id = ?", (not_text,))
    for sql in (  # the ranges: rowid i is op i
            "UPDATE NVTX_EVENTS SET start = 10000.5 WHERE rowid = 1",  # left out (a float)
            "UPDATE NVTX_EVENTS SET end = 'late' WHERE rowid = 2",  # left out
            "UPDATE NVTX_EVENTS SET globalTid = x'01' WHERE rowid = 3",  # left out
            "UPDATE NVTX_EVENTS SET end = start - 1 WHERE rowid = 4",  # left out (ends before it starts)
            f"UPDATE NVTX_EVENTS SET text = x'6f70', textId = {registered} WHERE rowid = 5",  # the registered text
            "UPDATE NVTX_EVENTS SET text = x'6f70' WHERE rowid = 6",  # no text
            "UPDATE NVTX_EVENTS SET int64Value = 'seven', uint64Value = 77 WHERE rowid = 7",  # payload 77
            "UPDATE NVTX_EVENTS SET int64Value = 8.5, uint64Value = 'x' WHERE rowid = 8",  # no payload
            f"UPDATE NVTX_EVENTS SET text = NULL, textId = {not_text} WHERE rowid = 9",  # no text
            "UPDATE NVTX_EVENTS SET start = NULL WHERE rowid = 10",  # left out
            # the launch calls
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 'soon' WHERE rowid = 1",  # left out
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 2.5 WHERE rowid = 2",  # left out
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 'name' WHERE rowid = 3",  # no API name
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid = 4",  # left out
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = start - 1 WHERE rowid = 5",  # left out
            # the kernels and memcpys
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 'wide', deviceId = 0.5 WHERE rowid = 6",
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = x'00', shortName = 'k' WHERE rowid = 7",
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = x'01' WHERE rowid = 8",  # left out
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE rowid = 9",  # left out
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = NULL, registersPerThread = 3.25 WHERE rowid = 10",
            "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 'many', copyKind = 1.5 WHERE rowid = 1"):
        b.db.execute(sql)
    path = b.close()
    monkeypatch.setenv(native.READ_AHEAD_ENV, ahead)
    src = open_source(str(path))
    try:
        assert native_lines.takes(src)
    finally:
        close_source(src)
    c_path, py_path = _outcome(path, False, monkeypatch), _outcome(path, True, monkeypatch)
    assert c_path == py_path
    left_out = {k.split(" rows ")[0]: n for k, n in c_path[1]["oddities"].items() if k.endswith("left out")}
    assert left_out == {"NVTX range": 5, "launch call": 4, "kernel": 2}
    records = [json.loads(line) for line in c_path[0].splitlines()[1:] if '"kind"' in line]
    assert len(records) == 12 - 2 + 2  # the kernels not left out, and the memcpys


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("piece_chars", [1, 4096, 1 << 18])
def test_text_in_pieces_is_the_lines_with_their_newlines(monkeypatch, pure, piece_chars):
    """parse writes writer.text's pieces: the lines of writer.lines each ended by its newline, in strs that pass
    ``piece_chars`` only by their last line (1: one line each; the header and side lines come in pieces of their
    own), on both paths."""
    from pyprof.parse.write import writer

    if not pure and native._core is None:
        pytest.skip("the compiled core is not built")
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    monkeypatch.setattr(writer, "PIECE_CHARS", piece_chars)
    got = {}
    for make in (writer.lines, writer.text):
        src = open_source(str(EMIT_NVTX))
        try:
            out, stats = make(src, False)
            got[make.__name__] = (list(out), vars(stats))
        finally:
            close_source(src)
    lines, pieces = got["lines"][0], got["text"][0]
    assert got["lines"][1] == got["text"][1]
    assert "".join(pieces) == "".join(line + "\n" for line in lines)
    assert all(p.endswith("\n") and len(p) - len(p[:-1].rsplit("\n", 1)[-1]) - 1 < piece_chars for p in pieces)
    if piece_chars == 1:
        assert len(pieces) == len(lines)
    else:
        assert 1 < len(pieces) < len(lines)
