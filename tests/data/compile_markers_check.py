"""Run examples/compiled.py's steps under pyprof.init() with a recording sink and say whether the measured steps
ran the compiled graph (no F.linear markers inside) or eagerly. GPU machine: python3 tests/data/compile_markers_check.py"""
import sys

sys.path.insert(0, "examples")
sys.argv = ["compiled.py", "--steps", "2", "--warmup", "3"]
import pyprof  # noqa: E402
from pyprof.nvtx import RecordingSink  # noqa: E402

sink = RecordingSink()
real_init = pyprof.nvtx.init
pyprof.nvtx.init = lambda **kw: real_init(sink=sink, **kw)
import compiled  # noqa: E402

compiled.main()
texts = [e[1] for e in sink.events if e[0] == "push"]
print("F.linear markers:", sum('"op":"linear"' in t for t in texts), "of", len(texts), "ranges")
