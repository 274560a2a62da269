"""A torch.compile'd MLP under pyprof.init(): the compiled region runs as Inductor/Triton kernels.

Under pyprof.init() every kernel Inductor generates gets a range naming the aten ops it fuses, their shapes and
the user's line (pyprof.nvtx.inductor). --mode picks torch.compile's mode: max-autotune generates Triton GEMM
templates; it and reduce-overhead replay the compiled graphs as CUDA graphs (capture the whole run, with
--cuda-graph-trace=node, so that the graphs' capture is in the export). --flops counts the same step run eagerly
(a compiled graph dispatches no op for FlopCounterMode to count); --dynamo FILE writes Dynamo's counters.
Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o compiled python examples/compiled.py
"""
import torch
import torch.nn.functional as F
from torch import nn

import harness


def main():
    args = harness.parse_args(__doc__.splitlines()[0], add_options=harness.compile_options)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device=args.device)

    def step(net):
        opt.zero_grad()
        loss = F.mse_loss(net(x), x)
        loss.backward()
        opt.step()

    harness.run_compiled(step, model, args, "compiled")


if __name__ == "__main__":
    main()
