"""A custom torch.autograd.Function made visible with pyprof.wrap (forward and backward).

The Function's own code could be a C++/CUDA extension; pyprof.wrap gives its calls the same markers
as torch's. Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o custom_fn python examples/custom_function.py
"""
import torch

import harness
import pyprof


class ScaledAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, alpha):
        ctx.alpha = alpha
        return a + alpha * b

    @staticmethod
    def backward(ctx, grad):
        return grad, ctx.alpha * grad, None


pyprof.wrap(ScaledAdd, "forward")
pyprof.wrap(ScaledAdd, "backward")


def main():
    args = harness.parse_args(__doc__.splitlines()[0])
    a = torch.randn(1024, 1024, device=args.device, requires_grad=True)
    b = torch.randn(1024, 1024, device=args.device, requires_grad=True)
    opt = torch.optim.SGD([a, b], lr=0.01)

    def step():
        opt.zero_grad()
        out = ScaledAdd.apply(a, b, 0.5)
        out.sum().backward()
        opt.step()

    harness.run(step, args, "custom_function")


if __name__ == "__main__":
    main()
