"""Fixtures of the report tests: records of the committed H200 captures (through ``python -m pyprof.parse``,
once per session) and their decompressed SQLite exports for independent checks with sqlite3."""
from __future__ import annotations

import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from report_helpers import CORPUS, DATA, ROOT, ParseFailed
from pyprof.record import read_lines
from shared_files import require_shared



def _parse(path: Path) -> list[dict]:
    """parse's records of an export, through ``python -m pyprof.parse``; a failed parse fails with its stderr."""
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(path)], capture_output=True, cwd=ROOT)
    if p.returncode:
        raise ParseFailed(f"pyprof.parse {path.name} exited {p.returncode}: {p.stderr.decode()[-600:]}")
    return list(read_lines(p.stdout.splitlines()))


@pytest.fixture(scope="session")
def records(tmp_path_factory):
    """``records("nsys/pyprof/transformer.sqlite.xz")`` -> list of record dicts (cached)."""
    cache: dict = {}

    def get(rel: str) -> list[dict]:
        if rel not in cache:
            path = DATA / rel
            assert path.is_file(), f"missing fixture {path}"
            cache[rel] = _parse(path)
        return cache[rel]
    return get


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus of other people's exports (tests/shared_files.py: skipped loudly without it, required
    in CI)."""
    require_shared()
    return CORPUS


@pytest.fixture(scope="session")
def corpus_records(corpus):
    """``corpus_records("external/x.json.gz")`` -> parse's records of a shared corpus file (cached)."""
    cache: dict = {}

    def get(rel: str) -> list[dict]:
        if rel not in cache:
            path = corpus / rel
            assert path.is_file(), f"missing corpus file {path}"
            cache[rel] = _parse(path)
        return cache[rel]
    return get


@pytest.fixture(scope="session")
def sqlite_path(tmp_path_factory):
    """``sqlite_path("transformer")`` -> path of the decompressed nsys/pyprof export."""
    out = tmp_path_factory.mktemp("sqlite")

    def get(name: str) -> Path:
        dst = out / f"{name}.sqlite"
        if not dst.exists():
            dst.write_bytes(lzma.decompress((DATA / "nsys" / "pyprof" / f"{name}.sqlite.xz").read_bytes()))
        return dst
    return get
