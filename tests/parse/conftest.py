"""Fixtures of the parse tests: the shared corpus location and a synthetic nsys export builder."""
from __future__ import annotations

from pathlib import Path

import pytest

from parse_synth import CORPUS, NsysBuilder


@pytest.fixture
def corpus() -> Path:
    """The shared corpus of real exports; its tests skip only when the folder is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not present at {CORPUS}")
    return CORPUS


@pytest.fixture
def nsys_builder(tmp_path):
    def make(name: str = "synthetic.sqlite", **kw) -> NsysBuilder:
        return NsysBuilder(tmp_path / name, **kw)
    return make
