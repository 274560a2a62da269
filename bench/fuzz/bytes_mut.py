"""Byte-level mutations of any seed file (bytes flipped, a page zeroed, the file cut short), and of compressed
exports (a corrupt or cut gzip or xz stream, a gzip of text that is not UTF-8)."""
from __future__ import annotations

import gzip
import lzma
import random
from pathlib import Path

from bench.fuzz.registry import Built, mutation, parse_commands, records_commands
from bench.fuzz.seeds import choose

PAGE = 4096


def _seed(rng: random.Random, seeds, records_too: bool = True) -> tuple[Path, bool]:
    """A seed file and whether it is a records file (fed to prof/report) rather than an export."""
    pool = [(p, False) for p in seeds.exports()] + ([(p, True) for p in seeds.records + seeds.legacy]
                                                   if records_too else [])
    return choose(rng, pool, key=lambda e: e[0])


def _commands(rng, path: Path, is_records: bool) -> list:
    return records_commands(rng, str(path)) if is_records else parse_commands(rng, str(path))


def flip(rng: random.Random, data: bytearray, n: int, lo: int = 0) -> str:
    """Flip ``n`` random bytes at offsets >= lo; returns where."""
    at = sorted(rng.randrange(lo, len(data)) for _ in range(n))
    for i in at:
        data[i] ^= rng.choice((0xFF, 0x01, 0x80, rng.randrange(1, 256)))
    return f"{n} bytes flipped from offset {at[0]}"


@mutation("bytes.flip")
def flip_bytes(rng, seeds, folder) -> Built:
    src, rec = _seed(rng, seeds)
    data = bytearray(src.read_bytes())
    # Past the SQLite header most of the time: a flip there is found by SQLite only when the page is read.
    lo = 100 if data[:6] == b"SQLite" and rng.random() < 0.8 else 0
    what = flip(rng, data, rng.choice((1, 10, 100, 1000)), lo)
    path = folder / src.name
    path.write_bytes(bytes(data))
    return Built(f"{src.name}: {what}", _commands(rng, path, rec))


@mutation("bytes.zero_page")
def zero_page(rng, seeds, folder) -> Built:
    src, rec = _seed(rng, seeds, records_too=rng.random() < 0.2)
    data = bytearray(src.read_bytes())
    pages = max(1, len(data) // PAGE)
    page = rng.choice((0, 1, rng.randrange(pages), pages - 1))
    n = rng.choice((1, 1, 4))
    data[page * PAGE:(page + n) * PAGE] = bytes(len(data[page * PAGE:(page + n) * PAGE]))
    path = folder / src.name
    path.write_bytes(bytes(data))
    return Built(f"{src.name}: {n} page(s) of {PAGE} zeroed from page {page}", _commands(rng, path, rec))


@mutation("bytes.truncate")
def truncate(rng, seeds, folder) -> Built:
    src, rec = _seed(rng, seeds, records_too=rng.random() < 0.3)
    data = src.read_bytes()
    cut = rng.choice((0, 1, 16, 100, 1024, PAGE, len(data) // 2, rng.randrange(len(data)), len(data) - 1,
                      (len(data) // PAGE - 1) * PAGE))
    cut = max(0, min(cut, len(data)))
    path = folder / src.name
    path.write_bytes(data[:cut])
    return Built(f"{src.name}: cut to {cut} of {len(data)} bytes", _commands(rng, path, rec))


def _small_export(rng, seeds) -> Path:
    pool = sorted(seeds.exports(), key=lambda p: p.stat().st_size)[: max(4, len(seeds.exports()) // 2)]
    return rng.choice(pool)


@mutation("comp.gzip")
def gzip_corrupt(rng, seeds, folder) -> Built:
    """A gzip stream (of a trace or an export) with flipped bytes, cut short, with trailing garbage, a bad CRC,
    or whose content is not UTF-8 text (zlib.error, EOFError, UnicodeDecodeError inside the reader)."""
    src = _small_export(rng, seeds)
    raw = src.read_bytes()
    how = rng.choice(("flip", "cut", "trailing garbage", "bad crc", "not utf8", "empty member", "header only"))
    if how == "not utf8":
        raw = raw.replace(b'"name": "', b'"name": "\xff\xfe', 3) if raw[:1] == b"{" else b"{\xff\xfe" + raw
    comp = bytearray(gzip.compress(raw, compresslevel=1, mtime=0))
    if how == "flip":
        flip(rng, comp, rng.choice((1, 10)), lo=10)
    elif how == "cut":
        comp = comp[: rng.randrange(10, len(comp))]
    elif how == "trailing garbage":
        comp += b"garbage after the stream"
    elif how == "bad crc":
        comp[-8] ^= 0xFF
    elif how == "empty member":
        comp = bytearray(gzip.compress(b"", mtime=0))
    elif how == "header only":
        comp = comp[:10]
    path = folder / (src.name + ".gz")
    path.write_bytes(bytes(comp))
    return Built(f"{src.name}.gz: {how}", parse_commands(rng, str(path)))


@mutation("comp.xz")
def xz_corrupt(rng, seeds, folder) -> Built:
    src = _small_export(rng, seeds)
    raw = src.read_bytes()
    comp = bytearray(lzma.compress(raw, preset=0))
    how = rng.choice(("flip", "cut", "trailing garbage", "header only", "empty", "not sqlite inside"))
    if how == "flip":
        flip(rng, comp, rng.choice((1, 10)), lo=12)
    elif how == "cut":
        comp = comp[: rng.randrange(12, len(comp))]
    elif how == "trailing garbage":
        comp += b"garbage after the stream"
    elif how == "header only":
        comp = comp[:12]
    elif how == "empty":
        comp = bytearray(lzma.compress(b"", preset=0))
    else:
        comp = bytearray(lzma.compress(b"SQLite format 3\x00" + bytes(200), preset=0))
    name = src.name if src.name.endswith(".sqlite") else src.name + ".sqlite"
    path = folder / (name + ".xz")
    path.write_bytes(bytes(comp))
    return Built(f"{path.name}: {how}", parse_commands(rng, str(path)))
