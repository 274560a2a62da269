"""Many rank files from a few real ones: per-rank PyTorch profiler traces copied as the ranks of a larger job.

    python bench/scale_ranks.py OUT_DIR --ranks 64 [--shift-us 1000] RANK0.json.gz RANK1.json.gz ...

Rank k is a copy of source k mod len(sources) with its ``distributedInfo`` saying rank k of ``--ranks``, and
every event's ``ts`` shifted by k x ``--shift-us`` microseconds. The edit is made on the trace's text (the
digits of each ``"ts": N.NNN``), so times stay exact to the nanosecond: Kineto's microsecond floats of about
4.8e12 sit at the limit of a double's precision. Each kernel of rank k therefore starts k x shift later than
its source's: the ranks view's stragglers of the copies follow from the sources' own starts by arithmetic
(tests/prof/test_rank_files.py).
"""
from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path

_TS = re.compile(rb'("ts":\s*)(\d+)')
_DIST = re.compile(rb'"distributedInfo":\s*\{')


def scale_trace(text: bytes, rank: int, world: int, shift_us: int) -> bytes:
    """The trace ``text`` (uncompressed JSON) as rank ``rank`` of ``world``, its events ``shift_us`` later."""
    if shift_us:
        text = _TS.sub(lambda m: m.group(1) + str(int(m.group(2)) + shift_us).encode(), text)
    m = _DIST.search(text)
    if m is None:
        raise ValueError("the trace has no distributedInfo")
    end = text.index(b"}", m.end())  # the fields of distributedInfo before its first nested object
    head = re.sub(rb'("rank":\s*)\d+', rb"\g<1>%d" % rank, text[m.end():end], count=1)
    head = re.sub(rb'("world_size":\s*)\d+', rb"\g<1>%d" % world, head, count=1)
    return text[:m.end()] + head + text[end:]


def write_ranks(sources: list[Path], out_dir: Path, ranks: int, shift_us: int = 1000) -> list[Path]:
    """Write ``ranks`` rank files into ``out_dir`` (``rank{k:04d}.pt.trace.json.gz``); return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = [gzip.decompress(p.read_bytes()) for p in sources]
    paths = []
    for k in range(ranks):
        p = out_dir / f"rank{k:04d}.pt.trace.json.gz"
        p.write_bytes(gzip.compress(scale_trace(texts[k % len(texts)], k, ranks, k * shift_us), compresslevel=1))
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--shift-us", type=int, default=1000)
    a = ap.parse_args()
    paths = write_ranks(a.sources, a.out_dir, a.ranks, a.shift_us)
    print(f"{len(paths)} rank files in {a.out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
