"""What Nsight Systems' own Python options add to an export, read from its documented SQLite schema
(docs/capture.md says which of these were captured for real and which are tested only on exports built from the
schema):

* ``--pytorch=functions-trace-shapes`` (nsys 2026.4): the arguments' shapes as an NVTX payload of each range. The
  schema exports a range's decoded payload as JSON in ``NVTX_EVENTS.jsonText`` or ``jsonTextId`` (into
  ``StringIds``); a binary payload stays in ``binaryData``, whose layout the schema leaves to its own docs, and in
  the per-schema tables of ``nsys export --dynamic-tables=all``, whose array fields go to child tables the schema does
  not say how to join: those are not read.
* ``--python-backtrace=cuda``: a CUDA call's call stack, ``CUPTI_ACTIVITY_KIND_RUNTIME.callchainId`` ->
  ``CUDA_CALLCHAINS`` (id, stackDepth, symbol and module into ``StringIds``; depth 0 the innermost frame).
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator

from pyprof.parse.readers.frames import internal_file

CALLCHAINS = "CUDA_CALLCHAINS"
CALLCHAIN_COLUMNS = ("id", "stackDepth", "symbol", "module")
#: A Python frame's file and line as a frame's symbol or module text gives them: ``path.py:26`` or ``path.py(26)``
#: (how nsys writes a Python frame into CUDA_CALLCHAINS is not documented; a frame naming no .py file is native).
_PY_FRAME = re.compile(r"([^\s:()\[\]]+\.py)(?::(\d+)|\((\d+)\))?")


def python_site(symbol: str | None, module: str | None) -> str | None:
    """``file.py:line`` of a call-stack frame that is user Python code, ``file.py`` when the frame gives no line;
    None for native frames and torch's own (the same files pyprof.init() and the PyTorch profiler reader skip)."""
    for text in (symbol, module):
        m = _PY_FRAME.search(text) if text else None
        if m is not None:
            path = m.group(1)
            if internal_file(path):
                return None
            line = m.group(2) or m.group(3)
            return f"{path}:{line}" if line else path
    return None


def callchain_sites(rows: Iterable[tuple], strings: dict[int, str]) -> dict[int, str]:
    """Callchain id -> the innermost user Python frame of that call stack (python_site), from ``(id, stackDepth,
    symbol id, module id)`` rows ordered by id then depth; call stacks without one are left out."""
    out: dict[int, str] = {}
    sites: dict[str, str] = {}  # one string per distinct line: thousands of stacks share a few hundred lines
    for chain, _depth, symbol, module in rows:
        if chain in out:
            continue  # a deeper frame of a stack whose line is found
        site = python_site(strings.get(symbol), strings.get(module))
        if site is not None:
            out[chain] = sites.setdefault(site, site)
    return out


def with_payload_texts(rows: Iterator[tuple], payload_text) -> Iterator[tuple]:
    """Range rows ``(thread, start, end, text, call id, JSON payload)`` as RANGE_ROW tuples, a payload with shapes
    joined to the text (markers.payload_text)."""
    for thread, start, end, text, call, payload in rows:
        yield thread, start, end, (text if payload is None else payload_text(text, payload)), call
