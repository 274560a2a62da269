"""A whole training step of the transformer encoder captured into one CUDA graph and replayed.

The capture records every kernel of forward, backward and AdamW (capturable=True) as a graph node; each measured
step is one cudaGraphLaunch. With Nsight Systems' node-level graph trace each replayed kernel is reported, and
pyprof ties it to the ops that were running when its node was captured. Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=node -o cuda_graph python examples/cuda_graph.py
    (add --capture-range=cudaProfilerApi to keep only the measured replays; see docs/capture.md for what
    that leaves out)
"""
import torch
import torch.nn.functional as F

import harness
from transformer import Encoder


def main():
    args = harness.parse_args(__doc__.splitlines()[0])
    if args.device != "cuda":
        raise SystemExit("cuda_graph.py needs a CUDA GPU")
    if args.capture == "pyprof":  # before the graph's capture: its markers are what its replays are tied to
        import pyprof

        pyprof.init()
    model = Encoder().to(args.device, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True, foreach=True)
    tokens = torch.randint(0, 32000, (8, 512), device=args.device)

    def body():
        opt.zero_grad(set_to_none=False)  # the graph keeps its gradient buffers
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    # Warm up on a side stream (the CUDA graph docs' recipe), then capture one step.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()

    harness.run(graph.replay, args, "cuda_graph", flops_step=body)


if __name__ == "__main__":
    main()
