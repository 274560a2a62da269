"""Issue 41: pyprof.step()'s program mark (a zero-length range holding the program's own step times) is read back by
parse as the process's program line, on exports built from NVIDIA's schema (nsys_schema.py)."""
from __future__ import annotations

import io
import json

import pytest

from nsys_schema import Export2026
from pyprof.nvtx.timing import HOW_CPU
from pyprof.parse import parse_file
from pyprof.record import PROGRAM_MARK_PREFIX


def _side(path, kind: str) -> list[dict]:
    out = io.StringIO()
    parse_file(str(path), out)
    return [json.loads(x) for x in out.getvalue().splitlines() if x.startswith(f'{{"pyprof_side":"{kind}"')]


def test_parse_writes_the_last_program_mark_of_a_process_as_its_program_line(tmp_path):
    x = Export2026(tmp_path / "marked.sqlite")
    x.range(1000, 1200, "ProfilerStep#0")
    x.launch(1050, 1100, corr=7, kernel_start=2000)
    first = {"unprofiled_step_ns": [30_000_000], "captured_step_ns": [], "how": HOW_CPU}
    last = {"unprofiled_step_ns": [30_000_000, 31_000_000], "captured_step_ns": [45_000_000], "how": HOW_CPU}
    x.range(3000, 3000, PROGRAM_MARK_PREFIX + json.dumps(first) + "}")
    x.range(4000, 4000, PROGRAM_MARK_PREFIX + json.dumps(last) + "}")
    (line,) = _side(x.close(), "program")
    assert line == {"pyprof_side": "program", "pid": 4242, **last}


@pytest.mark.parametrize("body", ['{"unprofiled_step_ns": [-1], "captured_step_ns": [], "how": "x"}',
                                  '{"unprofiled_step_ns": [9223372036854775808], "captured_step_ns": [], "how": "x"}',
                                  '{"unprofiled_step_ns": "30", "captured_step_ns": [], "how": "x"}',
                                  '{"captured_step_ns": [], "how": "x"}', "[1, 2]", "{not json"])
def test_a_damaged_program_mark_gives_no_program_line(tmp_path, body):
    x = Export2026(tmp_path / "damaged.sqlite")
    x.range(1000, 1200, "ProfilerStep#0")
    x.launch(1050, 1100, corr=7, kernel_start=2000)
    x.range(3000, 3000, PROGRAM_MARK_PREFIX + body + "}")
    assert _side(x.close(), "program") == []
