from __future__ import annotations

import json

import pytest

import pyprof
from pyprof.nvtx import RecordingSink


class Capture:
    """A RecordingSink with helpers to read the markers back as decoded JSON."""

    def __init__(self, sink: RecordingSink):
        self.sink = sink

    def clear(self) -> None:
        self.sink.events.clear()

    def pushes(self) -> list[dict | str]:
        out = []
        for event in self.sink.events:
            if event[0] == "push":
                text = event[1]
                out.append(json.loads(text) if text.startswith("{") else text)
        return out

    def ops(self, op: str | None = None, mod: str | None = None) -> list[dict]:
        return [p for p in self.pushes() if isinstance(p, dict) and "op" in p
                and (op is None or p["op"] == op) and (mod is None or p["mod"] == mod)]

    def balanced(self) -> bool:
        depth = 0
        for event in self.sink.events:
            depth += 1 if event[0] == "push" else -1
            if depth < 0:
                return False
        return depth == 0


@pytest.fixture
def capture():
    """pyprof.init() with a recording sink; uninit() afterwards whatever happens."""
    sink = RecordingSink()
    pyprof.init(sink=sink)
    try:
        yield Capture(sink)
    finally:
        pyprof.uninit()
