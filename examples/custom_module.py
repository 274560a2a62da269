"""A custom nn.Module whose forward is made visible with pyprof.wrap.

Module calls are named automatically by init(modules=True); wrap() adds an op marker with the
forward's arguments (shapes, dtypes), as for torch's own functions. Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o custom_mod python examples/custom_module.py
"""
import torch

import harness
import pyprof


class Affine(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.n = torch.nn.Parameter(torch.ones(size))
        self.m = torch.nn.Parameter(torch.ones(size))

    def forward(self, x):
        return self.n * x + self.m


pyprof.wrap(Affine, "forward")


def main():
    args = harness.parse_args(__doc__.splitlines()[0])
    model = Affine(4096).to(args.device)
    x = torch.randn(256, 4096, device=args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    harness.run(step, args, "custom_module")


if __name__ == "__main__":
    main()
