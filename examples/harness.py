"""What every example shares: the command line, warm-up, step ranges and the three ways to capture.

Each example builds a model and a ``step()`` function and hands them to ``run``. Options:
  --capture pyprof      pyprof.init() (the default): run it under nsys, then python -m pyprof.parse
  --capture emit_nvtx   PyTorch's own autograd NVTX ranges only, with record_shapes=True (what pyprof reads without init)
  --capture emit_nvtx_names   emit_nvtx without shapes: its cheapest form, the yardstick for pyprof's overhead
  --capture compiled    pyprof.init(ops=False, modules=False, backward=False): only torch.compile's kernels are
                        named (what `pyprof run --backend torch` does; for --torch-trace)
  --capture none        no markers at all (the baseline for overhead)
  --torch-trace FILE    also record the measured steps with torch.profiler and write a Chrome trace
  --torch-trace-full    with --torch-trace: also with_stack, with_modules and profile_memory (source lines,
                        the module hierarchy, memory events)
  --memory FILE         write the measured steps' peak allocated and reserved CUDA memory as JSON
  --flops FILE          write FlopCounterMode's count of one step (forward and backward) as JSON
  --steps N --warmup N  measured steps (each inside an NVTX range ProfilerStep#i) after warm-up steps
The measured steps are bracketed by torch.cuda.profiler.start()/stop(), so
``nsys profile --capture-range=cudaProfilerApi`` records them alone.

Under torchrun (a process group initialized before ``run``), every rank runs the same steps and:
  - the ranks meet at a barrier before the measured steps, so no rank's warm-up falls in another's window;
  - --torch-trace and --memory name one file per rank (``rank_path``): ``{rank}`` in FILE is replaced by the
    rank, else ``.rank<R>`` goes before a final ``.json`` / ``.json.gz`` (``ddp.json`` -> ``ddp.rank0.json``),
    or after the name when it has neither;
  - --flops: every rank counts one step (its collectives need all ranks), rank 0 alone writes FILE as given:
    each rank runs the same shapes, so the count is the same on every rank (the FLOPs of one rank, not all);
  - rank 0 alone prints the summary line, which ends with ``ranks=<world size>``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import Callable

import torch
import torch.distributed as dist


def parse_args(description: str, steps: int = 2, warmup: int = 3,
               add_options: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """Return the options every example takes (see the module docstring), plus those ``add_options`` adds."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--capture", choices=["pyprof", "compiled", "emit_nvtx", "emit_nvtx_names", "none"], default="pyprof")
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--torch-trace", metavar="FILE")
    p.add_argument("--torch-trace-full", action="store_true")
    p.add_argument("--flops", metavar="FILE")
    p.add_argument("--memory", metavar="FILE")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    if add_options is not None:
        add_options(p)
    return p.parse_args()


def rank_path(path: str) -> str:
    """Return ``path`` for this process: unchanged outside a process group, else with its rank in the name.

    ``{rank}`` in ``path`` is replaced by the rank; without it ``.rank<R>`` goes before a final ``.json`` or
    ``.json.gz`` (``/tmp/ddp.pt.trace.json`` -> ``/tmp/ddp.pt.trace.rank1.json``), or at the end otherwise."""
    if not _distributed():
        return path
    rank = dist.get_rank()
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    for ext in (".json.gz", ".json"):
        if path.endswith(ext):
            return f"{path[:-len(ext)]}.rank{rank}{ext}"
    return f"{path}.rank{rank}"


def run(step, args: argparse.Namespace, name: str, flops_step=None) -> None:
    """Warm up, then run ``args.steps`` measured steps of ``step()`` under the chosen capture. ``flops_step``: what
    --flops counts, when not ``step`` itself (a graph replay dispatches no op: its eager step is counted)."""
    if args.capture == "pyprof":
        import pyprof
        pyprof.init()
    elif args.capture == "compiled":
        import pyprof
        pyprof.init(ops=False, modules=False, backward=False)
    for _ in range(args.warmup):
        step()
    _sync(args.device)
    if _distributed():
        dist.barrier()
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
        if _distributed() and args.device == "cuda":
            # One nsys session around torchrun ends at the first cudaProfilerStop: no rank stops before the
            # others have finished their steps (this barrier's one small all-reduce falls in the window).
            dist.barrier()
            _sync(args.device)
        torch.cuda.profiler.stop() if args.device == "cuda" else None
    seconds = time.perf_counter() - t0
    rank = dist.get_rank() if _distributed() else 0
    if rank == 0:
        ranks = f", ranks={dist.get_world_size()}" if _distributed() else ""
        print(f"{name}: {args.steps} steps, {seconds / args.steps * 1e3:.2f} ms/step, capture={args.capture}{ranks}")
    if args.memory and args.device == "cuda":
        with open(rank_path(args.memory), "w") as f:
            json.dump({"example": name, "max_memory_allocated": torch.cuda.max_memory_allocated(),
                       "max_memory_reserved": torch.cuda.max_memory_reserved()}, f, indent=1)
    if prof is not None:
        prof.export_chrome_trace(rank_path(args.torch_trace))
    if args.flops:
        # After the measured steps: torch.compile does not compile a frame first called under a dispatch mode
        # such as FlopCounterMode, and that frame would then run eagerly in the capture too.
        _count_flops(flops_step or step, args.flops if rank == 0 else None, name)


def _torch_profiler(full: bool = False):
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities, record_shapes=True, with_stack=full, with_modules=full,
                                  profile_memory=full)


def _count_flops(step, path: str | None, name: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    if path is None:  # another rank writes: this one only took part in the step's collectives
        return
    by_op = {str(op): n for op, n in counter.get_flop_counts().get("Global", {}).items()}
    with open(path, "w") as f:
        json.dump({"example": name, "flops_per_step": counter.get_total_flops(), "by_op": by_op}, f, indent=1)


COMPILE_MODES = ["default", "max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead"]


def compile_options(p: argparse.ArgumentParser) -> None:
    """The options of the torch.compile examples: --mode (torch.compile's) and --dynamo FILE."""
    p.add_argument("--mode", choices=COMPILE_MODES, default="default")
    p.add_argument("--dynamo", metavar="FILE", help="write Dynamo's counters (frames, graphs, breaks) as JSON")


def run_compiled(step, model, args: argparse.Namespace, name: str) -> None:
    """``run`` for a torch.compile example: ``step(net)`` trains ``net`` one step; the measured steps run the model
    compiled in ``args.mode``, --flops counts the step run eagerly (a compiled graph dispatches no op for
    FlopCounterMode to count), and Dynamo's counters are reported at the end."""
    compiled = torch.compile(model, mode=None if args.mode == "default" else args.mode)
    run(lambda: step(compiled), args, name, flops_step=lambda: step(model))
    dynamo_report(args.dynamo, name)


def dynamo_report(path: str | None, name: str) -> dict:
    """Print (and write to ``path`` as JSON) Dynamo's counters: compiled frames, graphs, graph breaks, recompiles.
    Run with and without pyprof.init(), they show whether pyprof caused a break or a recompile."""
    from torch._dynamo.utils import counters

    report = {"example": name, "frames": dict(counters["frames"]), "unique_graphs": counters["stats"].get("unique_graphs", 0),
              "graph_breaks": sum(counters["graph_break"].values()), "recompiles": dict(counters["recompiles"])}
    print(f"{name}: Dynamo {report}")
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
    return report


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
