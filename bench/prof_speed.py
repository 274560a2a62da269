"""How fast prof turns records into the per-kernel CSV, against a baseline measured in the same run.

Builds an input of N records (default 1M) shaped like a transformer + ResNet training step (GEMMs,
convolutions, attention, norms, pointwise, backward kernels with forward links, memcpys), then times:
- baseline: read each line, decode it whole (orjson), csv.writer the raw default-column fields; and the same
  with prof's own decoder, which builds only the fields prof reads (msgspec, pyprof.prof.load.reader.lean_loads);
- prof: ``pyprof.prof.run`` with the default columns in CSV (what ``python -m pyprof.prof --csv`` does).
Prints one line per figure: rows/s of each and prof's ratio to the baseline. Target: >= 300k rows/s.
``--group-by KEY`` also times the ``--group-by`` summary (``summarize_stream``, what the command runs) with one
process and with one worker per CPU, against the same summary of records decoded whole
(``summarize(read_records(...))``, the command's path before it decoded only the keys it reads).

    python bench/prof_speed.py [--rows 1000000] [--keep FILE] [--from RECORDS] [--against CHECKOUT] [--group-by KEY]

``--against CHECKOUT`` also times another checkout's prof (e.g. main before a change) on the same input,
alternating with this one, in CPU seconds of one process: the ratio of the two is the change's cost.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# As the commands do (pyprof.common.run_command): numpy's BLAS, which they never use, keeps one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


from pyprof.record import END_KEY, HEADER_KEY, SIDE_KEY, Record, end_line  # noqa: E402
from pyprof.prof.table.rows import lean_decoder  # noqa: E402
from pyprof.prof.table.per_kernel import run_stream  # noqa: E402
from pyprof.prof.table.columns import DEFAULT  # noqa: E402
from pyprof.prof.load.reader import loads, read_records  # noqa: E402
from pyprof.prof.table.summary import summarize, summarize_stream  # noqa: E402


def _t(shape, dtype="bfloat16"):
    return {"type": "tensor", "shape": shape, "dtype": dtype, "contig": True, "device": 0}


def _templates() -> list[dict]:
    lin = [_t([8, 512, 1024]), _t([4096, 1024]), _t([4096])]
    conv = [_t([32, 64, 56, 56], "float16"), _t([64, 64, 3, 3], "float16"), {"type": "none", "value": None},
            {"name": "stride", "type": "tuple", "value": [1, 1]}, {"name": "padding", "type": "tuple", "value": [1, 1]}]
    q = _t([8, 16, 512, 64])
    base = {"kind": "kernel", "gpu": "NVIDIA H200", "device": 0, "stream": 7, "grid": [132, 1, 1], "block": [384, 1, 1],
            "registers": 168, "static_smem_bytes": 0, "dynamic_smem_bytes": 213000, "api": "cudaLaunchKernel",
            "layer": ["encoder"], "trace": ["train.py:10", "model.py:55"], "reprMarkers": [], "marker": [],
            "seqMarker": [], "altSeqId": [], "ranges": ["step", "encoder"], "schema": 1}
    out = [
        dict(base, kShortName="sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
             "segment_k_off_kernel__5x_cublas", dir="fprop", mod=["torch.nn.functional"], op=["linear"], args=lin,
             callsite="model.py:55"),
        dict(base, kShortName="vectorized_elementwise_kernel", dir="fprop", mod=["torch.nn.functional"], op=["gelu"],
             args=[_t([8, 512, 4096])], callsite="model.py:56"),
        dict(base, kShortName="vectorized_layer_norm_kernel", dir="fprop", mod=["torch.nn.functional"],
             op=["layer_norm"], args=[_t([8, 512, 1024]), {"type": "tuple", "value": [1024]}, _t([1024]), _t([1024])],
             callsite="model.py:57"),
        dict(base, kShortName="flash_fwd_kernel", dir="fprop", mod=["torch.nn.functional"],
             op=["scaled_dot_product_attention"], args=[q, q, q], callsite="model.py:60"),
        dict(base, kShortName="sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x128x32_stage4_"
             "warpsize2x2x1_g1_tensor16x8x16_kernel", dir="fprop", mod=["torch.nn.functional"], op=["conv2d"],
             args=conv, callsite="resnet.py:41"),
        dict(base, kShortName="nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", dir="bprop", mod=["aten"],
             op=["AddmmBackward0"], args=[], fwd={"mod": ["torch.nn.functional"], "op": ["linear"], "args": lin,
                                                  "callsite": "model.py:55", "layer": ["encoder"], "seq": 380}),
        dict(base, kShortName="elementwise_kernel", dir="fprop", mod=["torch.Tensor"], op=["add_"],
             args=[_t([8, 512, 1024]), _t([8, 512, 1024])], callsite="model.py:61"),
        dict(base, kind="memcpy", kShortName="Memcpy HtoD", bytes=1 << 20, copy_kind="HtoD", dir="", mod=[], op=[],
             args=[]),
    ]
    return out


def make_input(path: str, rows: int) -> None:
    """Write ``rows`` records cycling through the templates with fresh times and ids, as parse writes records."""
    rng = random.Random(0)
    tpl = _templates()
    t = 1_000_000_000
    with open(path, "w") as f:
        for i in range(rows):
            r = dict(tpl[i % len(tpl)])
            dur = rng.randint(2_000, 200_000)
            r.update(kDuration=dur, start_ns=t, end_ns=t + dur, pid=4242, tid=4243, correlation_id=i + 1,
                     api_start_ns=t - 5000, api_end_ns=t - 1000, seqId=[i // 8], subSeqId=0)
            t += dur + 1000
            f.write(Record.from_dict(r).to_json() + "\n")  # as parse writes it: its keys, its order
        f.write(end_line(rows) + "\n")


def replicate(src: str, path: str, rows: int) -> None:
    """Write ``rows`` records by repeating the records of ``src`` (e.g. parse's output for a real capture),
    with shifted start times and fresh sequence ids so that op calls stay distinct."""
    # the records only: parse's header, side (memory, host) and end lines are not records
    recs = [d for d in (json.loads(line) for line in open(src) if line.strip())
            if not {END_KEY, HEADER_KEY, SIDE_KEY} & d.keys()]
    if not recs:
        raise SystemExit(f"{src}: no records")
    with open(path, "w") as f:
        for i in range(rows):
            r = dict(recs[i % len(recs)])
            rep = i // len(recs)
            r["start_ns"] = (r.get("start_ns") or 0) + rep * 10**9
            r["seqId"] = [s + rep * 10**6 for s in r.get("seqId") or []]
            f.write(Record.from_dict(r).to_json() + "\n")  # as parse writes it: its keys, its order
        f.write(end_line(rows) + "\n")


def baseline(path: str, loads=loads, name: str = "baseline") -> float:
    """Seconds to decode every line with ``loads`` and csv.writer its raw default-column fields."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    batch = []
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            d = loads(line)
            batch.append((i, d.get("dir"), d.get("subSeqId"), (d.get("mod") or ("",))[0], (d.get("op") or ("",))[0],
                          d.get("kShortName"), "", d.get("kDuration")))
            if len(batch) >= 2048:
                w.writerows(batch)
                batch.clear()
                out.seek(0)
                out.truncate()
        w.writerows(batch)
    _cpu[name] = time.process_time() - c0
    return time.perf_counter() - t0


class _Sink(io.StringIO):
    def write(self, s: str) -> int:  # count, do not keep: the bench measures prof, not memory
        return len(s)


def prof(path: str, jobs: int = 1) -> float:
    """Seconds for pyprof.prof's streaming pipeline to write the default-column CSV."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    with open(path, "rb") as f:
        run_stream(f, path, _Sink(), DEFAULT, "csv", jobs=jobs)
    _cpu[f"prof{jobs}"] = time.process_time() - c0
    return time.perf_counter() - t0


def group_by(path: str, key: str, jobs: int = 0) -> float:
    """Seconds for the ``--group-by KEY`` table (CSV): the command's path with ``jobs`` workers, or with 0 the
    records decoded whole first (reader.read_records)."""
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        if jobs:
            summarize_stream(f, path, _Sink(), key, "csv", jobs=jobs)
        else:
            summarize(read_records(f, path), _Sink(), key, "csv")
    return time.perf_counter() - t0


_cpu: dict = {}  # CPU seconds of this process per measurement: robust to other load on the machine

_CHILD = """
import io, sys, time
try:
    from pyprof.prof.table.per_kernel import run_stream
except ImportError:  # a checkout from before issue 14 named the module pyprof.prof.report
    from pyprof.prof.report import run_stream
from pyprof.prof.table.columns import DEFAULT
class Sink(io.StringIO):
    def write(self, s):
        return len(s)
c = time.process_time()
with open(sys.argv[1], "rb") as f:
    run_stream(f, sys.argv[1], Sink(), DEFAULT, "csv", jobs=1)
print(time.process_time() - c)
print(run_stream.__code__.co_filename)
"""


def cpu_seconds(checkout: str, path: str) -> float:
    """CPU seconds of one process running ``checkout``'s prof (default columns, CSV, --jobs 1) on ``path``."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": checkout, "OPENBLAS_NUM_THREADS": "1"}
    # Run in the checkout: ``python -c`` puts the working folder first on sys.path, ahead of PYTHONPATH, so
    # that a bench started inside another checkout would time that one's pyprof for both.
    out = subprocess.run([sys.executable, "-c", _CHILD, path], env=env, capture_output=True, text=True, check=True,
                         cwd=checkout)
    seconds, module = out.stdout.strip().splitlines()[-2:]
    if not os.path.realpath(module).startswith(os.path.realpath(checkout) + os.sep):
        raise SystemExit(f"--against: {checkout}'s run imported pyprof from {module}")
    return float(seconds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", default=None, help="write the generated input here and keep it")
    ap.add_argument("--from", dest="src", default=None,
                    help="replicate this records file (parse's output for a real capture) instead of the templates")
    ap.add_argument("--against", default=None, metavar="CHECKOUT",
                    help="also time this checkout's prof on the same input (its CPU seconds against this one's)")
    ap.add_argument("--group-by", default=None, metavar="KEY", help="also time the --group-by KEY summary")
    a = ap.parse_args()
    path = a.keep or tempfile.mktemp(suffix=".jsonl", prefix="prof_speed_")
    try:
        if a.src:
            replicate(a.src, path, a.rows)
        else:
            make_input(path, a.rows)
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        tb = baseline(path)
        lean = lean_decoder(DEFAULT)
        tl = baseline(path, lean, "lean") if lean is not None else None
        t1 = prof(path, 1)
        tj = prof(path, jobs)
        print(f"input: {a.rows} rows, {os.path.getsize(path) / a.rows:.0f} bytes/row, {jobs} CPU(s); prof decodes "
              f"{'only the fields it reads (msgspec)' if lean is not None else 'whole records'}")
        print(f"baseline (one process: whole-record decode ({loads.__module__ or 'json'}) + csv.writer of raw "
              f"fields): {a.rows / tb:,.0f} rows/s")
        if tl is not None:
            print(f"baseline with prof's decoder (only the fields prof reads): {a.rows / tl:,.0f} rows/s")
        print(f"prof --csv --jobs 1 (default columns): {a.rows / t1:,.0f} rows/s, ratio to baseline {tb / t1:.2f}")
        print(f"prof --csv --jobs {jobs} (the CLI default): {a.rows / tj:,.0f} rows/s, "
              f"ratio to baseline {tb / tj:.2f}; "
              f"its main process busy {_cpu[f'prof{jobs}'] / tj:.0%} of the time (CPU {_cpu[f'prof{jobs}']:.2f} s in "
              f"{tj:.2f} s; near 100% it would be what bounds the workers)")
        print(f"one process, per CPU-second (insensitive to other load): baseline {a.rows / _cpu['baseline']:,.0f} "
              f"rows/s, prof {a.rows / _cpu['prof1']:,.0f} rows/s, ratio {_cpu['baseline'] / _cpu['prof1']:.2f}")
        print(f"load average during the run: {os.getloadavg()[0]:.2f} on {jobs} CPU(s)")
        if a.against:
            here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
            this, other = [], []
            for _ in range(3):  # alternated: the machine's load changes along the run
                other.append(cpu_seconds(a.against, path))
                this.append(cpu_seconds(here, path))
            print(f"this checkout, CPU seconds (best of 3): {min(this):.3f}; {a.against}: {min(other):.3f}; "
                  f"ratio {min(this) / min(other):.2f}")
        if a.group_by:
            whole, g1, gj = group_by(path, a.group_by), group_by(path, a.group_by, 1), group_by(path, a.group_by, jobs)
            print(f"--group-by {a.group_by}, records decoded whole: {a.rows / whole:,.0f} rows/s; the command's path "
                  f"--jobs 1: {a.rows / g1:,.0f} rows/s ({whole / g1:.2f}x), --jobs {jobs}: {a.rows / gj:,.0f} rows/s "
                  f"({whole / gj:.2f}x)")
        best = max(a.rows / t1, a.rows / tj)
        print(f"target 300k rows/s: {'met' if best >= 300_000 else 'NOT met'} (best {best:,.0f} rows/s)")
    finally:
        if not a.keep and os.path.exists(path):
            os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
