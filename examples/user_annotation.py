"""Layer annotation: `layer:` ranges inside a ResNet bottleneck group kernels by layer (PyProf's convention).

pyprof.layer("name") works as a context manager and as a decorator; ranges pushed by hand with
torch.cuda.nvtx.range_push("layer:...") mean the same to pyprof.parse.
Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o annot python examples/user_annotation.py
    nsys export --type sqlite -o annot.sqlite annot.nsys-rep
    python -m pyprof.parse annot.sqlite > annot.dict && python -m pyprof.prof --group-by layer annot.dict
"""
import torch
import torch.nn.functional as F
from torch import nn

import harness
import pyprof


class Bottleneck(nn.Module):
    def __init__(self, index, channels=256, width=64):
        super().__init__()
        self.index = index
        self.conv1 = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        with pyprof.layer(f"Bottleneck_{self.index}"):
            with pyprof.layer("Conv1"):
                out = self.conv1(x)
            with pyprof.layer("BN1"):
                out = self.bn1(out)
            with pyprof.layer("ReLU1"):
                out = F.relu(out)
            with pyprof.layer("Conv2"):
                out = F.relu(self.bn2(self.conv2(out)))
            torch.cuda.nvtx.range_push("layer:Conv3")  # the hand-written form means the same
            out = self.bn3(self.conv3(out))
            torch.cuda.nvtx.range_pop()
            return F.relu(out + x)


@pyprof.layer("Head")
def head(x, fc):
    return fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    args = harness.parse_args(__doc__.splitlines()[0])
    blocks = nn.Sequential(*(Bottleneck(i) for i in range(3))).to(args.device)
    fc = nn.Linear(256, 1000).to(args.device)
    params = list(blocks.parameters()) + list(fc.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    x = torch.randn(32, 256, 56, 56, device=args.device)
    y = torch.randint(0, 1000, (32,), device=args.device)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(head(blocks(x), fc), y)
        loss.backward()
        opt.step()

    harness.run(step, args, "user_annotation")


if __name__ == "__main__":
    main()
