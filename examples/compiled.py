"""A torch.compile'd MLP under pyprof.init(): the compiled region runs as Inductor/Triton kernels.

What runs inside a compiled graph has no per-op markers (pyprof's wrappers step aside while Dynamo
traces, so the graph is the same as without pyprof); its kernels are still reported, under the
enclosing module and step ranges. Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o compiled python examples/compiled.py
"""
import torch
import torch.nn.functional as F
from torch import nn

import harness


def main():
    args = harness.parse_args(__doc__.splitlines()[0])
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(args.device)
    compiled = torch.compile(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device=args.device)

    def step():
        opt.zero_grad()
        loss = F.mse_loss(compiled(x), x)
        loss.backward()
        opt.step()

    harness.run(step, args, "compiled")
    from torch._dynamo.utils import counters
    print(f"compiled: Dynamo frames {dict(counters['frames'])}, graphs {counters['stats'].get('unique_graphs')}, "
          f"graph breaks {sum(counters['graph_break'].values())}")


if __name__ == "__main__":
    main()
