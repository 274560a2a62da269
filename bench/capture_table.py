"""What each capture path costs a real training step, side by side in one run (issue 41's table).

    python bench/capture_table.py [--steps 12] [--warmup 5] [--modes bare,init,...] [--nsys PATH]

The step: a Hugging Face Llama built from a config (no weights: transformers' LlamaForCausalLM(config)), bf16
autocast, SDPA (transformers' default attention) with grouped-query attention (16 heads, 4 key/value heads),
fused AdamW, batch 8 x 512 tokens.
Each mode runs in its own process (``--child MODE``), which times every step with CUDA events, one per step
boundary on the current stream (nothing per op), and prints the median of the warm steps. Modes:

    bare          no profiler
    init          pyprof.init() alone (no collector: NVTX calls are no-ops, so this is pyprof's own work)
    emit_nvtx     torch.autograd.profiler.emit_nvtx(record_shapes=True)
    torch         torch.profiler.profile(record_shapes=True), CPU and CUDA activities
    torch_full    the same with with_stack=True and profile_memory=True
    nsys          Nsight Systems, CUDA only (-t cuda), no markers
    nsys_init     Nsight Systems -t cuda,nvtx with pyprof.init()
    nsys_autograd Nsight Systems --pytorch=autograd-shapes-nvtx

Prints one line per mode: the median step (ms) and its ratio to bare measured in the same run. Needs a CUDA GPU
and transformers; the nsys modes need Nsight Systems (``--nsys``, default $NSYS), and are skipped without it.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

MODES = ("bare", "init", "emit_nvtx", "torch", "torch_full", "nsys", "nsys_init", "nsys_autograd")
NSYS_FLAGS = {"nsys": ["-t", "cuda"], "nsys_init": ["-t", "cuda,nvtx"],
              "nsys_autograd": ["-t", "cuda,nvtx", "--pytorch=autograd-shapes-nvtx"]}


def _model_and_step(torch):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                         num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
    model = LlamaForCausalLM(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def child(mode: str, steps: int, warmup: int) -> None:
    """Run the training steps under ``mode`` (the nsys modes: inside nsys, started by the parent) and print the
    median step time of the steps after ``warmup``."""
    import contextlib

    import torch

    if mode in ("init", "nsys_init"):
        import pyprof

        pyprof.init()
    step = _model_and_step(torch)
    if mode == "emit_nvtx":
        ctx = torch.autograd.profiler.emit_nvtx(record_shapes=True)
    elif mode in ("torch", "torch_full"):
        full = mode == "torch_full"
        ctx = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                 torch.profiler.ProfilerActivity.CUDA],
                                     record_shapes=True, with_stack=full, profile_memory=full)
    else:
        ctx = contextlib.nullcontext()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(warmup + steps + 1)]
    with ctx:
        events[0].record()
        for i in range(warmup + steps):
            step()
            events[i + 1].record()
        torch.cuda.synchronize()
    times = [events[i].elapsed_time(events[i + 1]) for i in range(warmup, warmup + steps)]
    print(f"step_ms {statistics.median(times):.3f} min {min(times):.3f} max {max(times):.3f}", flush=True)


def run_mode(mode: str, steps: int, warmup: int, nsys: str | None) -> float | None:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--steps", str(steps), "--warmup", str(warmup)]
    if mode in NSYS_FLAGS:
        if not nsys:
            return None
        out = os.path.join(tempfile.mkdtemp(prefix="capture-table-"), "r")
        cmd = [nsys, "profile", *NSYS_FLAGS[mode], "-s", "none", "--cpuctxsw=none", "-o", out, "-f", "true", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"step_ms ([0-9.]+)", p.stdout)
    if m is None:
        sys.stderr.write(f"{mode}: no step time (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}\n")
        return None
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--nsys", default=os.environ.get("NSYS"))
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.steps, a.warmup)
        return
    bare = None
    for mode in a.modes.split(","):
        ms = run_mode(mode, a.steps, a.warmup, a.nsys)
        if mode == "bare":
            bare = ms
        ratio = f"{ms / bare:.2f}" if ms is not None and bare else "na"
        print(f"{mode:14s} {ms if ms is not None else 'na'} ms/step  x{ratio} of bare", flush=True)


if __name__ == "__main__":
    main()
