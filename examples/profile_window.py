"""Profile only chosen iterations: warm up, then torch.cuda.profiler.start() ... stop().

    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop \
        -o window python examples/profile_window.py
Nsight Systems records nothing until start() and stops at stop(): the export holds the chosen steps alone,
with the pyprof markers of the calls made in between.
"""
import torch
import torch.nn.functional as F
from torch import nn

import pyprof

pyprof.init()
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512, device=device), torch.randint(0, 10, (256,), device=device)

for it in range(20):
    if it == 10 and device == "cuda":
        torch.cuda.profiler.start()  # warm-up is over: the profile starts here
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    if it == 12:
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        break
print("profiled iterations 10-12")
