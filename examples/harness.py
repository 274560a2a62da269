"""What every example shares: the command line, warm-up, step ranges and the three ways to capture.

Each example builds a model and a ``step()`` function and hands them to ``run``. Options:
  --capture pyprof      pyprof.init() (the default): run it under nsys, then python -m pyprof.parse
  --capture emit_nvtx   PyTorch's own autograd NVTX ranges only, with record_shapes=True (what pyprof reads without init)
  --capture emit_nvtx_names   emit_nvtx without shapes: its cheapest form, the yardstick for pyprof's overhead
  --capture none        no markers at all (the baseline for overhead)
  --torch-trace FILE    also record the measured steps with torch.profiler and write a Chrome trace
  --torch-trace-full    with --torch-trace: also with_stack, with_modules and profile_memory (source lines,
                        the module hierarchy, memory events)
  --memory FILE         write the measured steps' peak allocated and reserved CUDA memory as JSON
  --flops FILE          write FlopCounterMode's count of one step (forward and backward) as JSON
  --steps N --warmup N  measured steps (each inside an NVTX range ProfilerStep#i) after warm-up steps
The measured steps are bracketed by torch.cuda.profiler.start()/stop(), so
``nsys profile --capture-range=cudaProfilerApi`` records them alone.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch


def parse_args(description: str, steps: int = 2, warmup: int = 3) -> argparse.Namespace:
    """Return the options every example takes (see the module docstring)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--capture", choices=["pyprof", "emit_nvtx", "emit_nvtx_names", "none"], default="pyprof")
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--torch-trace", metavar="FILE")
    p.add_argument("--torch-trace-full", action="store_true")
    p.add_argument("--flops", metavar="FILE")
    p.add_argument("--memory", metavar="FILE")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return p.parse_args()


def run(step, args: argparse.Namespace, name: str) -> None:
    """Warm up, then run ``args.steps`` measured steps of ``step()`` under the chosen capture."""
    if args.capture == "pyprof":
        import pyprof
        pyprof.init()
    for _ in range(args.warmup):
        step()
    _sync(args.device)
    # record_shapes: what a user of emit_nvtx alone needs for pyprof to know the shapes of each aten op.
    capture = (torch.autograd.profiler.emit_nvtx(record_shapes=args.capture == "emit_nvtx")
               if args.capture.startswith("emit_nvtx") else contextlib.nullcontext())
    tracer = _torch_profiler(args.torch_trace_full) if args.torch_trace else contextlib.nullcontext()
    if args.memory and args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with tracer as prof, capture:
        torch.cuda.profiler.start() if args.device == "cuda" else None
        for i in range(args.steps):
            with torch.cuda.nvtx.range(f"ProfilerStep#{i}") if args.device == "cuda" else contextlib.nullcontext():
                step()
            if prof is not None:
                prof.step()
        _sync(args.device)
        torch.cuda.profiler.stop() if args.device == "cuda" else None
    seconds = time.perf_counter() - t0
    print(f"{name}: {args.steps} steps, {seconds / args.steps * 1e3:.2f} ms/step, capture={args.capture}")
    if args.memory and args.device == "cuda":
        with open(args.memory, "w") as f:
            json.dump({"example": name, "max_memory_allocated": torch.cuda.max_memory_allocated(),
                       "max_memory_reserved": torch.cuda.max_memory_reserved()}, f, indent=1)
    if prof is not None:
        prof.export_chrome_trace(args.torch_trace)
    if args.flops:
        # After the measured steps: torch.compile does not compile a frame first called under a dispatch mode
        # such as FlopCounterMode, and that frame would then run eagerly in the capture too.
        _count_flops(step, args.flops, name)


def _torch_profiler(full: bool = False):
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities, record_shapes=True, with_stack=full, with_modules=full,
                                  profile_memory=full)


def _count_flops(step, path: str, name: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    by_op = {str(op): n for op, n in counter.get_flop_counts().get("Global", {}).items()}
    with open(path, "w") as f:
        json.dump({"example": name, "flops_per_step": counter.get_total_flops(), "by_op": by_op}, f, indent=1)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
