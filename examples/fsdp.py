"""FSDP2 training steps of examples/transformer.py's encoder: fp32 master parameters, bf16 compute, one process per GPU.

``fully_shard`` (PyTorch >= 2.6) shards each Block, then the root (embedding, final norm and head), over all
ranks; MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32) all-gathers the parameters in bf16
for forward and backward and reduce-scatters the gradients in fp32 onto the fp32 shards AdamW updates.
The same runs on the CPU with gloo, policy included (checked with PyTorch 2.13 CPU: gloo all-gathers
bf16 and carries the reduce-scatter as an all-reduce, ``gloo:all_reduce`` in a trace). The options, the data
(seeded by rank), the per-rank files and the capture commands are those of examples/ddp.py:
    torchrun --nproc-per-node 2 examples/fsdp.py
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop -o fsdp torchrun --nproc-per-node 2 examples/fsdp.py
    torchrun --nproc-per-node 2 examples/fsdp.py --capture none --torch-trace /tmp/fsdp.pt.trace.json
The last writes /tmp/fsdp.pt.trace.rank0.json and ...rank1.json. --check prints each rank's last loss and a
checksum of the whole (all-gathered) parameters, the same on every rank by construction: it shows that the
shards make one model, not that the gradients were reduced (ddp.py's --check shows that).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import harness
from ddp import add_options, build_encoder, init_distributed, make_step, print_check, rank_tokens


def main():
    args = harness.parse_args(__doc__.splitlines()[0], add_options=add_options)
    device = init_distributed(args)
    try:
        model = build_encoder(args, device, torch.float32)  # the same on every rank: each keeps its shard of it
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.layers:
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        step, last = make_step(model, opt, rank_tokens(args, device))
        harness.run(step, args, "fsdp")
        if args.check:
            print_check("fsdp", last["loss"], [p.full_tensor() for p in model.parameters()])
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
