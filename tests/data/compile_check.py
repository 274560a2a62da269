"""Does torch.compile still compile under pyprof.init() (and under emit_nvtx)? Run on the GPU machine:
    python3 tests/data/compile_check.py none|emit|pyprof
Prints Dynamo's counters: graphs compiled, frames ok/total, graph breaks."""
import sys

import torch
import torch.nn as nn
from torch._dynamo.utils import counters

mode = sys.argv[1]
if mode == "pyprof":
    import pyprof
    pyprof.init()
elif mode == "emit":
    torch.autograd.profiler.emit_nvtx().__enter__()
m = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).cuda()
c = torch.compile(m)
x = torch.randn(64, 256, device="cuda")
for _ in range(3):
    c(x).sum().backward()
torch.cuda.synchronize()
print(mode, "unique_graphs", counters["stats"].get("unique_graphs"), "frames", dict(counters["frames"]),
      "graph_breaks", sum(counters["graph_break"].values()), "inductor", dict(counters["inductor"]).get("fxgraph_cache_miss"))
