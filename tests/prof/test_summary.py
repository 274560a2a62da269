"""--group-by kernel: one row per kernel (its full name), labelled so that kernels sharing a short name differ."""
from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys

import pytest

from shared_files import EXTERNAL
from pyprof.prof.table import parallel
from pyprof.prof.load.reader import read_records
from pyprof.prof.table.groups import GROUP_KEYS, kernel_labels
from pyprof.prof.table.summary import summarize, summarize_stream
from pyprof.record import read_lines

from .helpers import parsed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = str(EXTERNAL / "tracelens_b200_eager_trace.json.gz")


def test_labels():
    names = {"void k<int, A::copy_fn>(int)": "k", "void k<int, B::fill_fn>(int)": "k", "void other<1>()": "other"}
    assert kernel_labels(names) == {"void k<int, A::copy_fn>(int)": "k<A>", "void k<int, B::fill_fn>(int)": "k<B>",
                                    "void other<1>()": "other"}
    # nothing tells them apart but the order of the same words: their rank among the sorted full names
    assert kernel_labels({"k<1, 2>": "k", "k<2, 1>": "k"}) == {"k<1, 2>": "k<#1>", "k<2, 1>": "k<#2>"}
    # names left mangled (ck_tile's RMSNorm, twice, differing in an enum deep in its arguments) have no words: their
    # rank tells them, where the word would be the whole mangled remainder, cut alike at a terminal's width
    a, b = "_ZN7ck_tile6kentryILi1ENS_5FusedILi0EEEEvv", "_ZN7ck_tile6kentryILi1ENS_5FusedILi1EEEEvv"
    assert kernel_labels({a: "kentry", b: "kentry"}) == {a: "kentry<#1>", b: "kentry<#2>"}


def test_group_by_kernel_on_the_b200_trace(shared):
    """Two elementwise_kernel<128, 4, ...> kernels of the TraceLens B200 trace: 72 direct copies and one masked
    fill, 380568 ns and 7712 ns by the JSON's own durations (sum of dur per full name, in us)."""
    with gzip.open(TRACE) as f:
        events = json.load(f)["traceEvents"]
    recount: dict = {}
    for e in events:
        if e.get("cat") == "kernel" and e["name"].startswith("void at::native::elementwise_kernel<128, 4,"):
            kind = "copy" if "direct_copy_kernel_cuda" in e["name"] else "fill"
            g = recount.setdefault(kind, [0, 0.0])
            g[0] += 1
            g[1] += e["dur"]
    assert {k: (n, round(us * 1000)) for k, (n, us) in recount.items()} == {"copy": (72, 380568), "fill": (1, 7712)}
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", TRACE], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0
    out = io.StringIO()
    summarize(read_records(io.BytesIO(p.stdout), "b200"), out, "kernel", fmt="csv")
    rows = {r.split(",")[0]: r.split(",") for r in out.getvalue().splitlines()[1:]}
    # Time(ms) to 0.1 us: 380568 ns = 0.3806 ms, 7712 ns = 0.0077 ms
    assert rows["elementwise_kernel<direct_copy_kernel_cuda>"][1:3] == ["72", "0.3806"]
    assert rows["elementwise_kernel<masked_fill_kernel>"][1:3] == ["1", "0.0077"]
    assert "elementwise_kernel" not in rows


def test_group_by_op_keeps_recomputed_and_unlinked_backward_work_apart(tmp_path, shared):
    """Activation checkpointing's recomputed convolutions are 'conv2d (recompute)', not forward 'conv2d' nor the
    backward node they run in; backward work without a forward link (the engine's AccumulateGrad copies) is
    'op (bprop)', not the forward op of the same name. Counts are those of the records parse marked."""
    trace = os.path.join(ROOT, "tests", "data", "kineto", "checkpoint.pt.trace.json.gz")
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", trace], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT}, check=True)
    recs = list(read_lines(p.stdout.splitlines()))  # every key of each record, header and end lines skipped
    out = io.StringIO()
    summarize(read_records(io.BytesIO(p.stdout), "ckpt"), out, "op", fmt="csv")
    rows = {line.split(",")[0]: int(line.split(",")[1]) for line in out.getvalue().splitlines()[1:]}
    recomputed = sum(1 for r in recs if r["kind"] == "kernel" and r["recompute"] and r["op"][0] == "conv2d")
    assert recomputed > 0 and rows["conv2d (recompute)"] == recomputed
    assert rows["conv2d"] == sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "fprop" and not r["recompute"]
                                 and r["op"][:1] == ["conv2d"])
    # TorchRec traces of HTA are sampled: most backward nodes' forward ops were dropped, so they have no link.
    sampled = os.path.join(os.path.dirname(TRACE), "hta_trace_filter_sampled_rank-0.json.gz")
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", sampled], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT}, check=True)
    recs = list(read_lines(p.stdout.splitlines()))  # every key of each record, header and end lines skipped
    out = io.StringIO()
    summarize(read_records(io.BytesIO(p.stdout), "sampled"), out, "op", fmt="csv")
    rows = {line.split(",")[0]: int(line.split(",")[1]) for line in out.getvalue().splitlines()[1:]}
    unlinked = [r for r in recs if r["kind"] == "kernel" and r["dir"] == "bprop" and not r["fwd"] and r["op"]]
    mm = sum(1 for r in unlinked if r["op"][0] == "mm")
    linked_mm = sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "bprop" and r["fwd"]
                    and r["fwd"]["op"] == "mm")
    assert mm > 0 and rows["mm (bprop)"] == mm + linked_mm
    assert rows.get("mm", 0) == sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "fprop"
                                    and r["op"][:1] == ["mm"])


# ---- the command's path: lean decoding, and --jobs workers

LEAN_CAPTURES = ["nsys/pyprof/transformer.sqlite.xz", "nsys/emit_nvtx/resnet.sqlite.xz",
                 "kineto/resnet.pt.trace.json.gz", "kineto/checkpoint.pt.trace.json.gz", "compiled/compiled.sqlite.xz"]


def _table(data: bytes, key: str, fmt: str, tmp_path=None, jobs: int = 1) -> tuple[str, str]:
    """(table, coverage text): decoded whole (read_records) without ``tmp_path``, else through the command's path
    on a file there."""
    out = io.StringIO()
    if tmp_path is None:
        cov = summarize(read_records(io.BytesIO(data), "x"), out, key, fmt=fmt)
    else:
        path = tmp_path / "in.dict"
        path.write_bytes(data)
        with open(path, "rb") as f:
            cov = summarize_stream(f, "x", out, key, fmt, jobs=jobs)
    return out.getvalue(), cov.text()


@pytest.mark.parametrize("rel", LEAN_CAPTURES)
def test_lean_decoding_and_workers_give_the_tables_of_the_whole_decode(rel, tmp_path, monkeypatch):
    """The command decodes of each line only the keys its group reads (GroupBy.reads), serially or in workers
    that group chunks of the file; every table must be the one of records decoded whole, to the last bit of the
    JSON Lines' floats (the workers' sums are added up in another order: groups.on_grid keeps them exact)."""
    data = parsed(rel)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", len(data) // 12)  # a dozen chunks: seams everywhere
    for key in GROUP_KEYS:
        whole, whole_cov = _table(data, key, "space")
        assert whole.count("\n") >= 2
        assert _table(data, key, "space", tmp_path) == (whole, whole_cov), key
        assert _table(data, key, "space", tmp_path, jobs=3) == (whole, whole_cov), key
        assert _table(data, key, "jsonl", tmp_path, jobs=3) == _table(data, key, "jsonl"), key


def test_group_by_dir_with_workers_counts_what_a_recount_of_the_records_counts(tmp_path, monkeypatch, capsys):
    """Through the command, with 3 workers on chunks of a few records: each direction's count and time are the
    recount's, by json over parse's records (every activity, kernels, copies and memsets)."""
    from pyprof.prof.cli import main

    data = parsed("nsys/pyprof/transformer.sqlite.xz")
    path = tmp_path / "in.dict"
    path.write_bytes(data)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 20_000)
    recount: dict = {}
    for r in read_lines(data.splitlines()):
        c = recount.setdefault(r["dir"] or "na", [0, 0])
        c[0] += 1
        c[1] += r["kDuration"]
    assert main(["--group-by", "dir", "--jsonl", "-q", "-j", "3", str(path)]) == 0
    got = {r["key"]: [r["count"], r["time_ms"]] for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert got == {k: [n, round(ns / 1e6, 4)] for k, (n, ns) in recount.items()}  # ms to 0.1 us
    assert len(got) >= 2


class _Reading(dict):
    """A record that notes every key read from it."""

    def __init__(self, d: dict, seen: set) -> None:
        super().__init__(d)
        self.seen = seen

    def get(self, k, default=None):
        self.seen.add(k)
        return super().get(k, default)

    def __getitem__(self, k):
        self.seen.add(k)
        return super().__getitem__(k)

    def __contains__(self, k):
        self.seen.add(k)
        return super().__contains__(k)


@pytest.mark.parametrize("rel", LEAN_CAPTURES)
def test_group_keys_and_samples_read_only_the_keys_they_declare(rel):
    """Lean decoding builds only GroupBy.reads, SAMPLE_KEYS and the model's keys: a key function or ``sample``
    that read another key would get None for it and group silently wrong. Of a forward link, lean decoding keeps
    reader._Fwd's keys."""
    from pyprof.prof.table.coverage import Coverage
    from pyprof.prof.table.groups import SAMPLE_KEYS, sample
    from pyprof.prof.model.modeller import Modeller
    from pyprof.prof.load.reader import _Fwd
    from pyprof.prof.model.roofline import Peaks
    from pyprof.prof.table.rows import rows

    records = read_records(io.BytesIO(parsed(rel)), "x")
    n = n_fwd = 0
    for _i, d, m, r in rows(records, Modeller(share=True), Peaks(), True, Coverage()):
        fwd_seen: set = set()
        if type(d.get("fwd")) is dict:
            d = {**d, "fwd": _Reading(d["fwd"], fwd_seen)}
            n_fwd += 1
        for name, by in GROUP_KEYS.items():
            seen: set = set()
            by.key(_Reading(d, seen))
            assert seen <= set(by.reads), (name, seen - set(by.reads))
        seen = set()
        sample(_Reading(d, seen), m, r)
        assert seen <= set(SAMPLE_KEYS), seen - set(SAMPLE_KEYS)
        assert fwd_seen <= set(_Fwd.__annotations__), fwd_seen - set(_Fwd.__annotations__)
        n += 1
    assert n >= 50
    if rel.startswith(("nsys/pyprof", "kineto/resnet")):
        assert n_fwd > 10  # backward kernels' keys read through their forward links


def test_ideal_times_on_the_grid_add_up_the_same_in_any_order():
    """Each ideal time is a multiple of 2**-10 ns (groups.on_grid): added up forward, backward or in chunks of 97
    (as workers add theirs), the sum is the exact one, the integer sum of the multiples / 1024. The same times off
    the grid give three different sums."""
    from pyprof.prof.table.groups import IDEAL_GRID, on_grid

    raw = [(k % 977) ** 2.5 / 3.0 + 0.1 for k in range(1, 20000)]  # ns; 5.6e10 in all, far below 2**43

    def three_sums(values: list) -> set:
        forward = backward = chunked = 0.0
        for v in values:
            forward += v
        for v in reversed(values):
            backward += v
        for i in range(0, len(values), 97):
            part = 0.0
            for v in values[i:i + 97]:
                part += v
            chunked += part
        return {forward, backward, chunked}

    assert len(three_sums(raw)) == 3
    grid = [on_grid(v) for v in raw]
    assert all(abs(g - v) <= 0.5 / IDEAL_GRID for g, v in zip(grid, raw))
    assert three_sums(grid) == {sum(round(v * IDEAL_GRID) for v in raw) / IDEAL_GRID}
