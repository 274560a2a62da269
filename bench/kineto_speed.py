"""Kineto trace reading speed and memory, against orjson loading the same file in the same round.

    taskset -c 0 python bench/kineto_speed.py TRACE.json [...] [--rounds 3] [--tree OTHER_CHECKOUT]
        [--candidates]

Each figure is measured in its own process (so that its peak memory is its own) and each round measures them
all, one after the other, so that a change in the machine's speed shows in every figure of that round alike:

- ``orjson``: read the file and ``orjson.loads`` it whole (the baseline: the fastest plain decode at hand);
- ``read``: pyprof's reader alone, read + decode + keep (``KinetoSource.check()``: the events kept and sorted);
- ``parse``: ``parse_file`` to /dev/null in the process (the whole parse, without the interpreter's start);
- ``cli``: ``python -m pyprof.parse FILE -o /dev/null`` (wall seconds of the command, start-up included);
- with ``--candidates``, decoders that could read a trace, decode only: ``msgspec-blocks`` (kineto_json's
  TraceReader, events into typed structs, arguments left undecoded), ``msgspec-whole`` (the file at once into
  the same structs), ``ijson`` (its C backend's event stream, dicts of every event, as pyprof read files its block
  reader refused until 2026-12; no longer a dependency: measured where it is installed).

With ``--tree``, ``read``, ``parse`` and ``cli`` are measured for that checkout too, alternating with this one's.
One line per figure and round: seconds, MB/s, the ratio of its seconds to orjson's in the same round, and the
peak memory it added (peak RSS less the RSS after imports), also as a share of the file's size. Then the median
ratio of each figure over the rounds.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run in a child: prints "seconds peak_added_bytes". The file is read inside the timed part.
CHILD = r"""
import os, resource, sys, time
path, what = sys.argv[1], sys.argv[2]
gz = path.endswith(".gz")
import gzip, orjson, msgspec
from pyprof.parse import parse_file
from pyprof.parse.readers.kineto import KinetoSource
import pyprof.parse.readers.kineto_json as kj
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def opened():
    return gzip.open(path, "rb") if gz else open(path, "rb")
base = rss()
t = time.perf_counter()
if what == "orjson":
    with opened() as f:
        orjson.loads(f.read())
elif what == "read":
    s = KinetoSource(path, gzipped=gz)
    s.check()
elif what == "parse":
    with open(os.devnull, "w") as out:
        parse_file(path, out)
elif what == "msgspec-blocks":
    with opened() as f:
        for block in kj.TraceReader(kj.Guarded(f, path, None), path).blocks():
            pass
elif what == "msgspec-whole":
    class Whole(msgspec.Struct):
        traceEvents: list[kj.Event] = []
    dec = msgspec.json.Decoder(Whole, float_hook=kj.Decimal)
    with opened() as f:
        dec.decode(f.read())
elif what == "ijson":
    import ijson
    with opened() as f:
        for ev in ijson.items(f, "traceEvents.item", buf_size=4 << 20):
            pass
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(seconds, max(0, peak - base))
"""


def measure(tree: str, path: str, what: str) -> tuple[float, int | None]:
    env = {**os.environ, "PYTHONPATH": tree}
    if what == "cli":
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pyprof.parse", "-q", path, "-o", os.devnull], env=env, check=True,
                       cwd=tree)
        return time.perf_counter() - t, None
    out = subprocess.run([sys.executable, "-c", CHILD, path, what], env=env, check=True, capture_output=True,
                         text=True, cwd=tree).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", help="another checkout to measure read, parse and cli of, alternating with this one")
    ap.add_argument("--candidates", action="store_true", help="the decoders that could read a trace, decode only")
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([("other", os.path.abspath(args.tree))] if args.tree else [])
    for path in args.traces:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                size = len(f.read())
        else:
            size = os.path.getsize(path)
        mb = size / 1e6
        print(f"{path}: {mb:.1f} MB of JSON")
        ratios: dict[str, list[float]] = {}
        for r in range(args.rounds):
            figures = [("orjson", ROOT, "orjson")]
            if args.candidates:
                figures += [(w, ROOT, w) for w in ("msgspec-blocks", "msgspec-whole", "ijson")
                            if w != "ijson" or importlib.util.find_spec("ijson")]
            order = trees if r % 2 == 0 else trees[::-1]
            figures += [(f"{what} ({name})", tree, what) for what in ("read", "parse", "cli") for name, tree in order]
            base = None
            for label, tree, what in figures:
                seconds, peak = measure(tree, path, what)
                base = seconds if base is None else base
                ratios.setdefault(label, []).append(seconds / base)
                mem = "" if peak is None else f"  peak +{peak / 1e6:.1f} MB ({peak / size:.2f} of the file)"
                print(f"  round {r + 1} {label:18s} {seconds:7.3f} s {mb / seconds:7.1f} MB/s "
                      f"{seconds / base:5.2f}x orjson{mem}")
        for label, rs in ratios.items():
            print(f"  median {label:18s} {statistics.median(rs):5.2f}x orjson")


if __name__ == "__main__":
    main()
