"""A plain training loop with no profiling code at all: what `pyprof run` is for.

    pyprof run -o out -- python examples/train_plain.py              # Nsight Systems when nsys is found
    pyprof run --backend torch -o out -- python examples/train_plain.py
"""
import argparse

import torch
import torch.nn.functional as F

from transformer import Encoder


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Encoder(dim=1024 if device == "cuda" else 64, heads=16 if device == "cuda" else 4,
                    vocab=32000 if device == "cuda" else 1000).to(device, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    tokens = torch.randint(0, 32000 if device == "cuda" else 1000, (8, 512 if device == "cuda" else 64), device=device)
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
    print(f"trained {args.steps} steps on {device}, loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
