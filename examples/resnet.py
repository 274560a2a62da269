"""One ImageNet-style ResNet-50 training step with automatic mixed precision (synthetic data, no weights).

Profile it on a GPU machine (only the measured steps, after warm-up):
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o resnet python examples/resnet.py
    nsys export --type sqlite -o resnet.sqlite resnet.nsys-rep
    python -m pyprof.parse resnet.sqlite > resnet.dict && python -m pyprof.prof --group-by op resnet.dict
"""
import torch
import torch.nn.functional as F
import torchvision

import harness


def main():
    args = harness.parse_args(__doc__.splitlines()[0], steps=1)
    model = torchvision.models.resnet50(weights=None).to(args.device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler(args.device)
    images = torch.randn(64, 3, 224, 224, device=args.device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (64,), device=args.device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.float16):
            loss = F.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    harness.run(step, args, "resnet50")


if __name__ == "__main__":
    main()
