"""DistributedDataParallel training steps of examples/transformer.py's encoder in bf16, one process per GPU.

Run it with torchrun, one process per GPU; each rank uses cuda:LOCAL_RANK and NCCL (without CUDA, or with
--device cpu, the CPU and gloo). Started without torchrun it is a process group of one.
    torchrun --nproc-per-node 2 examples/ddp.py
The model starts the same on every rank (DDP broadcasts rank 0's); each rank trains on its own tokens (seeded
by its rank), --batch sequences of --seq tokens (the last is only a target: batch 8 x 511 tokens by default,
as in transformer.py). The defaults are transformer.py's model; the tests run a tiny one on the CPU, e.g.
    torchrun --standalone --nproc-per-node 2 examples/ddp.py --dim 32 --heads 4 --depth 1 --vocab 128 --batch 2 --seq 16 --capture none

Profile every rank into one Nsight Systems report (each process starts and stops the capture around its
measured steps; the ranks meet at a barrier first):
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop -o ddp torchrun --nproc-per-node 2 examples/ddp.py
    nsys export --type sqlite -o ddp.sqlite ddp.nsys-rep
    python -m pyprof.parse ddp.sqlite > ddp.dict && python -m pyprof.prof ddp.dict
or with the PyTorch profiler, one trace per rank (harness.rank_path: /tmp/ddp.pt.trace.rank0.json, ...rank1.json,
each with the process group in its ``distributedInfo``):
    torchrun --nproc-per-node 2 examples/ddp.py --capture none --torch-trace /tmp/ddp.pt.trace.json
    python -m pyprof.parse /tmp/ddp.pt.trace.rank0.json /tmp/ddp.pt.trace.rank1.json > ddp.dict
--memory FILE is also written per rank; --flops FILE by rank 0 alone (one rank's step: the same on each).
Rank 0 alone prints the summary line. --check prints, for each rank, its last loss (different data, different
losses) and a checksum of its parameters (the same on every rank when the gradients were averaged).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import harness
from transformer import Encoder


def add_options(p: argparse.ArgumentParser) -> None:
    """Add the model's size (transformer.py's by default), the data's and --check to ``p``."""
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank")
    p.add_argument("--seq", type=int, default=512, help="tokens per sequence, the last one a target only")
    p.add_argument("--check", action="store_true",
                   help="print each rank's last loss and a checksum of its parameters after the steps")


def init_distributed(args: argparse.Namespace) -> torch.device:
    """Join torchrun's process group (NCCL on cuda:LOCAL_RANK, else gloo); return this rank's device.

    Without torchrun's environment the group is this process alone. Raises what init_process_group raises."""
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)  # harness's synchronize() and memory counters then mean this GPU
        backend = {"backend": "nccl", "device_id": device}
    else:
        device = torch.device(args.device)
        backend = {"backend": "gloo"}
    if "RANK" in os.environ:
        dist.init_process_group(**backend)
    else:
        dist.init_process_group(**backend, store=dist.HashStore(), rank=0, world_size=1)
    return device


def build_encoder(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> Encoder:
    """Return the encoder of the options' size, initialised alike on every rank (seed 0)."""
    torch.manual_seed(0)
    return Encoder(vocab=args.vocab, dim=args.dim, heads=args.heads, depth=args.depth).to(device, dtype)


def rank_tokens(args: argparse.Namespace, device: torch.device) -> torch.Tensor:
    """Return this rank's batch of token ids: seeded by the rank, so each rank sees other data."""
    gen = torch.Generator(device=device).manual_seed(1 + dist.get_rank())
    return torch.randint(0, args.vocab, (args.batch, args.seq), device=device, generator=gen)


def make_step(model: torch.nn.Module, opt: torch.optim.Optimizer, tokens: torch.Tensor):
    """Return ``step()``, one training step as in transformer.py, and a dict holding its last ``loss``."""
    last = {}

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        last["loss"] = loss

    return step, last


def print_check(name: str, loss: torch.Tensor, params: list[torch.Tensor]) -> None:
    """Print ``NAME rank R/W: loss L params sha256 H`` for this rank (``params`` whole, not sharded), rank by rank.

    Every rank must call it (it waits at barriers)."""
    digest = hashlib.sha256()
    for p in params:
        digest.update(p.detach().float().cpu().numpy().tobytes())
    line = (f"{name} rank {dist.get_rank()}/{dist.get_world_size()}: loss {loss.item():.6f} "
            f"params sha256 {digest.hexdigest()[:16]}\n")
    for rank in range(dist.get_world_size()):
        if rank == dist.get_rank():
            # One write, flushed before the next rank's turn: the ranks share the pipe, and print() writes
            # the line and its newline apart, so two ranks' lines could run together.
            sys.stdout.write(line)
            sys.stdout.flush()
        dist.barrier()


def main():
    args = harness.parse_args(__doc__.splitlines()[0], add_options=add_options)
    device = init_distributed(args)
    try:
        model = build_encoder(args, device, torch.bfloat16)
        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, foreach=True)
        step, last = make_step(ddp, opt, rank_tokens(args, device))
        harness.run(step, args, "ddp")
        if args.check:
            print_check("ddp", last["loss"], list(model.parameters()))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
