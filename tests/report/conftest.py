"""Fixtures of the report tests: records of the committed H200 captures (through ``python -m pyprof.parse``,
once per session) and their decompressed SQLite exports for independent checks with sqlite3."""
from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from report_helpers import DATA, ROOT


@pytest.fixture(scope="session")
def records(tmp_path_factory):
    """``records("nsys/pyprof/transformer.sqlite.xz")`` -> list of record dicts (cached)."""
    cache: dict = {}

    def get(rel: str) -> list[dict]:
        if rel not in cache:
            path = DATA / rel
            assert path.is_file(), f"missing fixture {path}"
            p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(path)], capture_output=True, cwd=ROOT,
                               check=True)
            cache[rel] = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
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
