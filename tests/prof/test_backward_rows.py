"""A backward kernel runs on the autograd thread, outside the user's layers and lines; its row names the layer
and call site of the forward op it belongs to (the record's ``fwd`` link), as the groups and views do, rather
than '-'. On the committed H200 LeNet capture: LeNet's fc3 is `self.fc3(x)` on line 30 of examples/lenet.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from pyprof.record import read_lines

from .helpers import parsed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_backward_rows_take_their_forward_ops_layer_and_line(tmp_path):
    path = tmp_path / "lenet.dict"
    path.write_bytes(parsed("nsys/pyprof/lenet.sqlite.xz"))
    records = list(read_lines(path.read_bytes().splitlines()))
    for jobs in ("1", "2"):
        p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-q", "-j", jobs, "--jsonl", "-c",
                            "idx,dir,op,layer,callsite", str(path)], capture_output=True, text=True, cwd=ROOT)
        rows = [json.loads(x) for x in p.stdout.splitlines()]
        assert p.returncode == 0 and len(rows) == len(records) == 124
        linked = [(r, d) for r, d in zip(rows, records) if d["dir"] == "bprop" and d["fwd"]]
        # parse's summary of this capture: 64 backward kernels, all linked (and the copies run in backward)
        assert sum(1 for _r, d in linked if d["kind"] == "kernel") == 64
        for r, d in linked:
            assert not d["layer"] and d["callsite"] is None  # the record's own: none (the autograd thread)
            assert r["layer"] == d["fwd"]["layer"] and r["callsite"] == d["fwd"]["callsite"]
        fc3 = [r for r, d in linked if r["layer"] == ["LeNet", "fc3"]]
        assert fc3 and all(r["callsite"].endswith("examples/lenet.py:30") for r in fc3)
