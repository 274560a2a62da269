"""Run examples/compiled.py's steps under pyprof.init() with a recording sink and say what the compiled kernels'
ranges name: how many kernel launches got a marker, and the markers themselves (op, kernel, site).
GPU machine: python3 tests/data/compile_markers_check.py [--mode max-autotune]"""
import json
import sys

sys.path.insert(0, "examples")
mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else "default"
sys.argv = ["compiled.py", "--steps", "2", "--warmup", "3", "--mode", mode]
import pyprof  # noqa: E402
from pyprof.nvtx import RecordingSink  # noqa: E402

sink = RecordingSink()
real_init = pyprof.nvtx.init
pyprof.nvtx.init = lambda **kw: real_init(sink=sink, **kw)
import compiled  # noqa: E402

compiled.main()
texts = [e[1] for e in sink.events if e[0] == "push"]
kernels = [json.loads(t) for t in texts if t.startswith('{"pyprof"') and '"mod":"inductor"' in t]
print("F.linear markers:", sum('"op":"linear"' in t for t in texts), "of", len(texts), "ranges")
print("compiled kernel markers:", len(kernels))
for k in {(k["graph"], k["kernel"], k["op"], k["site"]) for k in kernels}:
    print("  ", *k)
