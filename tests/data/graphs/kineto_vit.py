"""A timm ViT-S/16 whose CUDA graph is captured by hand inside a torch.profiler window, then replayed 3 times.

    python3 kineto_vit.py infer|train TRACE.json [--pyprof] [--flops FILE]

infer: the forward (bf16, batch 32, inference_mode) captured; train: a whole step (forward, backward, AdamW with
capturable=True) captured, as examples/cuda_graph.py does. The profiler records shapes, stacks and modules.
--pyprof: pyprof.init() before the model is built. --flops: FlopCounterMode's count of one eager step.
"""
import json
import sys

import timm
import torch
import torch.nn.functional as F

mode, trace = sys.argv[1], sys.argv[2]
if "--pyprof" in sys.argv:
    import pyprof

    pyprof.init()
model = timm.create_model("vit_small_patch16_224", num_classes=1000).cuda()
images = torch.randn(32, 3, 224, 224, device="cuda")
labels = torch.randint(0, 1000, (32,), device="cuda")
if mode == "infer":
    model = model.to(torch.bfloat16).eval()
    images = images.to(torch.bfloat16)

    def body():
        with torch.inference_mode():
            return model(images)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True, foreach=True)

    def body():
        opt.zero_grad(set_to_none=False)  # the graph keeps its gradient buffers
        with torch.autocast("cuda", torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()

if "--flops" in sys.argv:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        if mode == "infer":
            body()
        else:
            with torch.autocast("cuda", torch.bfloat16):
                F.cross_entropy(model(images), labels).backward()
    json.dump({"flops_per_step": counter.get_total_flops(),
               "by_op": {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}},
              open(sys.argv[sys.argv.index("--flops") + 1], "w"), indent=1)
side = torch.cuda.Stream()  # warm-up on a side stream: the CUDA graph docs' recipe
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        body()
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts, record_shapes=True, with_stack=True, with_modules=True) as prof:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    for i in range(3):
        with torch.profiler.record_function(f"ProfilerStep#{i}"):
            graph.replay()
    torch.cuda.synchronize()
prof.export_chrome_trace(trace)
ev = json.load(open(trace))["traceEvents"]
kern = [e for e in ev if e.get("cat") == "kernel"]
ids = [e for e in kern if "graph node id" in e.get("args", {})]
print(json.dumps({"mode": mode, "kernels": len(kern), "with_graph_node_id": len(ids),
                  "torch": torch.__version__}))
