import inspect, sys, torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
print("graph sig:", inspect.signature(torch.cuda.graph.__init__))
print("CUDAGraph:", [m for m in dir(torch.cuda.CUDAGraph) if not m.startswith("__")])
try:
    import cuda.bindings.runtime as rt, cuda.bindings.driver as drv
    print("cuda-python", [n for n in dir(drv) if "GraphNode" in n and ("Id" in n or "ID" in n)][:20])
except Exception as e:
    print("no cuda-python:", e)
mode = sys.argv[1] if len(sys.argv) > 1 else "before"
import pyprof
pyprof.init()
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).cuda()
x = torch.randn(64, 256, device="cuda")
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3): m(x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
if mode == "inside": torch.cuda.profiler.start()
with torch.cuda.graph(g):
    y = m(x)
if mode == "before": torch.cuda.profiler.start()
for _ in range(3): g.replay()
torch.cuda.synchronize(); torch.cuda.profiler.stop()
try:
    print("raw graph", g.raw_cuda_graph())
except Exception as e:
    print("raw_cuda_graph:", e)
