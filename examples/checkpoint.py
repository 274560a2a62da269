"""A ResNet-18 training step with activation checkpointing: each residual stage's activations are dropped after
the forward pass and recomputed during the backward pass (torch.utils.checkpoint), bf16 autocast, synthetic data.

The recomputed convolutions, batch norms and ReLUs run inside backward nodes; pyprof reports them as forward
ops of their own, marked as recomputed (the record's ``recompute`` key), not as the backward node around them.

Profile it on a GPU machine (only the measured steps, after warm-up):
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o ckpt python examples/checkpoint.py
    nsys export --type sqlite -o ckpt.sqlite ckpt.nsys-rep
    python -m pyprof.parse ckpt.sqlite > ckpt.dict && python -m pyprof.prof --group-by op ckpt.dict
``--reentrant`` uses the older reentrant implementation (``use_reentrant=True``), which recomputes the whole
stage inside one backward node of its own (CheckpointFunctionBackward).
"""
import sys

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.checkpoint import checkpoint

import harness


def main():
    reentrant = "--reentrant" in sys.argv
    if reentrant:
        sys.argv.remove("--reentrant")
    args = harness.parse_args(__doc__.splitlines()[0], steps=2)
    model = torchvision.models.resnet18(weights=None).to(args.device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(32, 3, 224, 224, device=args.device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (32,), device=args.device)
    stages = [model.layer1, model.layer2, model.layer3, model.layer4]

    def forward(x):
        x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
        for stage in stages:
            x = checkpoint(stage, x, use_reentrant=reentrant)
        return model.fc(torch.flatten(model.avgpool(x), 1))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.bfloat16):
            loss = F.cross_entropy(forward(images), labels)
        loss.backward()
        opt.step()

    harness.run(step, args, "checkpoint-reentrant" if reentrant else "checkpoint")


if __name__ == "__main__":
    main()
