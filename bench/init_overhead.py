"""Step time of a Llama-architecture training step with ``pyprof.init()`` against the same step bare, in one run.

    python bench/init_overhead.py [--layers 8] [--hidden H] [--seq S] [--optimizer fused] [--steps 10] [--rounds 5]

The model is transformers' LlamaForCausalLM built from a config (no weights): SDPA attention with grouped
query heads, cross-entropy loss, backward, AdamW (fused, or foreach with --optimizer foreach), bf16 autocast on CUDA.
Variants, run in alternating rounds so that a busy neighbour slows them all alike:
  bare       - no profiler;
  init       - ``pyprof.init()`` with its defaults (NVTX ranges; without a collector attached, nvtx's
               push and pop are near no-ops, so on a machine without nsys this is the wrappers' own cost);
  init-null  - ``pyprof.init(backward=False)`` with a sink that drops every range: the wrappers' own work,
               without any NVTX call (pyprof's or PyTorch's autograd ranges);
  init-ops   - ``pyprof.init(modules=False, backward=False)``: op ranges only;
  init-nobwd - ``pyprof.init(backward=False)`` (CUDA only): without PyTorch's autograd NVTX ranges, which
               init() turns on on CUDA builds; init minus init-nobwd is what those cost.
  hooks      - no pyprof, but a global module forward pre-hook and hook that do nothing: torch's own cost of
               having global module hooks (every module call takes its slow path);
  emit-nvtx  - no pyprof, but ``torch.autograd.profiler.emit_nvtx()`` (CUDA only): PyTorch's autograd ranges alone;
  emit-nvtx-bwd - the same around ``loss.backward()`` only (CUDA only): what those ranges cost if the forward aten
               ops went without them (the backward nodes' ranges are what links a backward kernel to its forward op).
Each step is timed alone (``perf_counter`` on the CPU; on CUDA, events around the step and a synchronize after
it). On CUDA the host's share is timed too: from the step's start to the return of its last call, before the
synchronize. A step whose host time exceeds its GPU time is host-bound: every microsecond added per call is
then added to the step, while below that the GPU hides it, so added costs are not additive across variants.
Prints one line per figure: the median step time, its ratio to bare measured in the same run, the median host
time, and the added time per range pushed; first, the ranges a step pushes (op and module ranges, counted with
a recording sink).
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

import pyprof


class NullSink:
    """A sink that drops every range: what is left of init()'s cost is the wrappers' own work."""

    def attributes(self, message: str):
        return message

    def push(self, attrs, call_id: int) -> None:
        pass

    def pop(self) -> None:
        pass


def build(opts, device: str):
    """Return the training step (a function of no arguments) of the model the options describe."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=opts.vocab, hidden_size=opts.hidden, intermediate_size=opts.hidden * 11 // 4,
                         num_hidden_layers=opts.layers, num_attention_heads=opts.heads,
                         num_key_value_heads=max(1, opts.heads // 4), max_position_embeddings=max(opts.seq, 128),
                         attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device)
    cuda = device == "cuda"
    fused = opts.optimizer == "fused"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused, foreach=not fused)
    tokens = torch.randint(0, opts.vocab, (opts.batch, opts.seq), device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=cuda):
            loss = model(input_ids=tokens, labels=tokens).loss
        with torch.autograd.profiler.emit_nvtx() if BACKWARD_NVTX[0] else contextlib.nullcontext():
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


BACKWARD_NVTX = [False]  # the emit-nvtx-bwd variant: PyTorch's autograd ranges around backward only


def time_steps(step, steps: int, cuda: bool) -> tuple[list[float], list[float]]:
    """Run ``steps`` steps; return each one's time and its host time (until the last call returned), in ms."""
    times, host = [], []
    for _ in range(steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            step()
            host.append((time.perf_counter() - t0) * 1e3)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
            host.append(times[-1])
    return times, host


@contextlib.contextmanager
def noop_module_hooks():
    """Global module hooks that do nothing: what torch's hook path costs by itself."""
    from torch.nn.modules import module as nn_module

    handles = [nn_module.register_module_forward_pre_hook(lambda module, args: None),
               nn_module.register_module_forward_hook(lambda module, args, out: None, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def _backward_nvtx():
    BACKWARD_NVTX[0] = True
    try:
        yield
    finally:
        BACKWARD_NVTX[0] = False


def variant_context(name: str, options):
    if name == "hooks":
        return noop_module_hooks()
    if name == "emit-nvtx":
        return torch.autograd.profiler.emit_nvtx()
    if name == "emit-nvtx-bwd":
        return _backward_nvtx()
    if options is None:
        return contextlib.nullcontext()
    return pyprof.profiling(**options)


def count_calls(step) -> tuple[int, int]:
    """Return (op ranges, module ranges) one step pushes, counted with a recording sink."""
    sink = pyprof.RecordingSink()
    with pyprof.profiling(sink=sink):
        step()
        sink.events.clear()
        step()
    pushes = [e[1] for e in sink.events if e[0] == "push"]
    modules = sum(1 for text in pushes if text.startswith('{"pyprof":1,"module"'))
    return len(pushes) - modules, modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Defaults: on CUDA the step of bench/capture_table.py (issue 41's table); on the CPU a model small enough that
    # the wrappers' cost is not lost in the CPU kernels' time, with the same calls per layer.
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, help="1024 on CUDA, 64 on the CPU")
    parser.add_argument("--heads", type=int, help="query heads (key/value heads: a quarter); 16 on CUDA, 4 on the CPU")
    parser.add_argument("--vocab", type=int, help="32000 on CUDA, 256 on the CPU")
    parser.add_argument("--batch", type=int, help="8 on CUDA, 1 on the CPU")
    parser.add_argument("--seq", type=int, help="512 on CUDA, 16 on the CPU")
    parser.add_argument("--optimizer", choices=("fused", "foreach"), default="fused",
                        help="AdamW's implementation: one fused call, or foreach ops (one call per update term)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default="bare,init,init-null,init-ops,init-nobwd,hooks,emit-nvtx,emit-nvtx-bwd",
                        help="init-nobwd and the emit-nvtx variants run on CUDA only")
    opts = parser.parse_args()
    cuda = torch.cuda.is_available()
    for name, on_cuda, on_cpu in (("hidden", 1024, 64), ("heads", 16, 4), ("vocab", 32000, 256), ("batch", 8, 1),
                                  ("seq", 512, 16)):
        if getattr(opts, name) is None:
            setattr(opts, name, on_cuda if cuda else on_cpu)
    step = build(opts, "cuda" if cuda else "cpu")
    variants = {"bare": None, "init": {}, "init-null": {"sink": NullSink(), "backward": False},
                "init-ops": {"modules": False, "backward": False}, "init-nobwd": {"backward": False}}
    # Without CUDA, init() never turns on the autograd NVTX mode: init-nobwd would be init again.
    cuda_only = ("init-nobwd", "emit-nvtx", "emit-nvtx-bwd")
    chosen = [v for v in opts.variants.split(",") if v and (cuda or v not in cuda_only)]
    for _ in range(3):  # warm-up: allocator, autograd graph, optimizer state
        step()
    ops, modules = count_calls(step)
    times: dict[str, list[float]] = {v: [] for v in chosen}
    host: dict[str, list[float]] = {v: [] for v in chosen}
    for _ in range(opts.rounds):
        for name in chosen:
            with variant_context(name, variants.get(name)):
                step()  # the markers of this step's calls are built here, as in any program's first step
                step_ms, host_ms = time_steps(step, opts.steps, cuda)
            times[name] += step_ms
            host[name] += host_ms
    print(f"torch {torch.__version__}, {'CUDA ' + torch.cuda.get_device_name() if cuda else 'CPU'}, "
          f"{opts.layers} layers hidden {opts.hidden}, {opts.rounds}x{opts.steps} steps per variant")
    print(f"calls/step  {ops} op ranges, {modules} module ranges")
    base = statistics.median(times["bare"]) if "bare" in times else None
    for name in chosen:
        ms = statistics.median(times[name])
        line = f"{name:10s} {ms:8.2f} ms/step  host {statistics.median(host[name]):8.2f} ms"
        if base is not None and name in ("hooks", "emit-nvtx", "emit-nvtx-bwd"):
            line += f"  x{ms / base:5.3f} of bare"
        elif base is not None:
            ranges = ops if name == "init-ops" else ops + modules
            line += f"  x{ms / base:5.3f} of bare  added {(ms - base) * 1e3 / max(ranges, 1):6.2f} us/range"
        print(line)


if __name__ == "__main__":
    main()
