"""Compressed inputs are bounded by how far they expand (common.MAX_EXPANSION past FREE_EXPANSION_BYTES): a
decompression bomb is refused in one line, nothing written, nothing left in the temporary folder."""
from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import pytest

import pyprof.common as common
from pyprof.parse.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
TRACE = DATA / "kineto" / "lenet.pt.trace.json.gz"
EXPORT = DATA / "nsys" / "pyprof" / "lenet.sqlite.xz"


def _expansion(path: Path, opener) -> float:
    with opener(path, "rb") as f:
        return len(f.read()) / path.stat().st_size


@pytest.fixture
def no_free_bytes(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "FREE_EXPANSION_BYTES", 0)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("path,opener", [(TRACE, gzip.open), (EXPORT, lzma.open)], ids=["trace.gz", "export.xz"])
def test_real_inputs_expand_less_than_the_cap(path, opener, no_free_bytes, capsys):
    # The committed captures expand well under 100x (measured here, not assumed), so they parse with no free bytes.
    assert _expansion(path, opener) < common.MAX_EXPANSION
    assert main(["-q", str(path)]) == 0
    assert capsys.readouterr().out.count("\n") > 1


@pytest.mark.parametrize("path,opener", [(TRACE, gzip.open), (EXPORT, lzma.open)], ids=["trace.gz", "export.xz"])
def test_an_input_expanding_past_the_cap_is_refused(path, opener, no_free_bytes, monkeypatch, capsys):
    ratio = _expansion(path, opener)
    monkeypatch.setattr(common, "MAX_EXPANSION", max(1, int(ratio) - 1))  # just under this file's own expansion
    assert main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and str(path) in err and "decompression bomb" in err
    assert list(no_free_bytes.iterdir()) == []  # no decompressed export left behind


def test_a_gzip_bomb_trace(no_free_bytes, capsys):
    # 64 MB of spaces inside a valid trace compress about 1000-fold: far past 100x.
    bomb = no_free_bytes / "bomb.pt.trace.json.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(b'{"traceEvents": [')
        for _ in range(64):
            f.write(b" " * (1 << 20))
        f.write(b"]}")
    assert bomb.stat().st_size * 500 < 64 << 20
    assert main([str(bomb)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "decompression bomb" in err and err.count("\n") == 1
    assert [p.name for p in no_free_bytes.iterdir()] == ["bomb.pt.trace.json.gz"]
