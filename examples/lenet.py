"""A LeNet-style CNN training loop on synthetic MNIST-sized data.

Profile it on a GPU machine:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o lenet python examples/lenet.py
    nsys export --type sqlite -o lenet.sqlite lenet.nsys-rep
    python -m pyprof.parse lenet.sqlite > lenet.dict && python -m pyprof.prof -w 150 lenet.dict
"""
import torch
import torch.nn.functional as F
from torch import nn

import harness


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    args = harness.parse_args(__doc__.splitlines()[0])
    model = LeNet().to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.randn(64, 1, 28, 28, device=args.device)
    target = torch.randint(0, 10, (64,), device=args.device)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        opt.step()

    harness.run(step, args, "lenet")


if __name__ == "__main__":
    main()
