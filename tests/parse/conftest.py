"""Fixtures of the parse tests: the shared corpus location and a synthetic nsys export builder."""
from __future__ import annotations

from pathlib import Path

import pytest

from parse_synth import CORPUS, NsysBuilder
from shared_files import require_shared


@pytest.fixture
def corpus() -> Path:
    """The shared corpus of real exports (tests/shared_files.py: skipped loudly without it, required in CI)."""
    require_shared()
    return CORPUS


@pytest.fixture
def nsys_builder(tmp_path):
    def make(name: str = "synthetic.sqlite", **kw) -> NsysBuilder:
        return NsysBuilder(tmp_path / name, **kw)
    return make
