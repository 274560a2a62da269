"""Models built from library configs, run the ways production runs them, CUDA graphs captured before the profiled
range: ``train`` (a timm ViT-S/16 trained under torch.compile mode="reduce-overhead", captured during warm-up),
``generate`` (a Hugging Face Llama's generate() with a static KV cache: transformers compiles its decode step with
CUDA graphs), ``eager-generate`` (generate() with the dynamic cache, no graphs: one forward per token) and ``serve``
(``--rounds`` eager generate() calls and nothing else: for ``pyprof run --forward-steps``, which keeps the window).

    nsys profile -t cuda,nvtx --cuda-graph-trace=node --capture-range=cudaProfilerApi --capture-range-end=stop \\
        -o llama_train python examples/llama_graphs.py train
    python examples/llama_graphs.py train --flops flops.json      # FlopCounterMode's count of one eager step

``pyprof.init()`` is called first, so the captures' ranges are kept and written when the profiler starts
(docs/capture.md, "CUDA graphs"). The profiled range is ``--steps`` steps (train) or one generate() call.
``--timing FILE`` writes the script's own timings without any capture: each step's time (train), or the times
between successive tokens of a generate() call (a streamer's callback; the first gap is the prefill).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def _model(layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=1024,
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config).to("cuda", torch.bfloat16), config


class _Clock:
    """A streamer: the time each token arrives (generate() calls put() once for the prompt, then once a token)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value) -> None:
        torch.cuda.synchronize()
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def train(args) -> None:
    import timm

    model = timm.create_model("vit_small_patch16_224", num_classes=1000).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    images = torch.randn(args.batch, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (args.batch,), device="cuda")

    def loss_of(net):
        with torch.autocast("cuda", torch.bfloat16):
            return torch.nn.functional.cross_entropy(net(images), labels)

    def step():
        loss_of(compiled).backward()
        opt.step()
        opt.zero_grad()  # set to None: a gradient kept would be an output of the last replay, overwritten by the next

    if args.flops:
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            loss_of(model).backward()
        json.dump({"flops_per_step": counter.get_total_flops(),
                   "by_op": {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}},
                  open(args.flops, "w"), indent=1)
        return
    compiled = torch.compile(model, mode="reduce-overhead")
    for _ in range(args.warmup):
        torch.compiler.cudagraph_mark_step_begin()
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.steps):  # the program's own steps: nothing of the capture on
        t = time.perf_counter()
        torch.compiler.cudagraph_mark_step_begin()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    torch.cuda.profiler.start()
    for i in range(args.steps):
        with torch.cuda.nvtx.range(f"ProfilerStep#{i}"):
            torch.compiler.cudagraph_mark_step_begin()
            step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    _write(args, {"step_s": times})


def generate(args, static: bool) -> None:
    model, config = _model(args.layers)
    model.eval()
    prompt = torch.randint(0, config.vocab_size, (args.gen_batch, args.prompt), device="cuda")
    kw = dict(max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False, pad_token_id=0)
    if static:
        kw["cache_implementation"] = "static"
    with torch.inference_mode():
        for _ in range(args.warmup):  # static: compiles and captures the decode step's graphs
            model.generate(prompt, **kw)
        clock = _Clock()
        model.generate(prompt, streamer=clock, **kw)  # the program's own times: nothing of the capture on
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model.generate(prompt, **kw)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    gaps = [b - a for a, b in zip(clock.times, clock.times[1:])]
    _write(args, {"prefill_s": gaps[0], "per_token_s": gaps[1:], "median_per_token_s": statistics.median(gaps[1:]),
                  "tokens": args.tokens, "prompt": args.prompt, "batch": args.gen_batch})


def serve(args) -> None:
    """generate() ``--rounds`` times, each timed token by token by a streamer: the loop's own timing, in the process
    that pyprof run profiles (the rounds outside its window ran with nothing of the capture on)."""
    model, config = _model(args.layers)
    model.eval()
    prompt = torch.randint(0, config.vocab_size, (args.gen_batch, args.prompt), device="cuda")
    kw = dict(max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False, pad_token_id=0)
    if args.static:
        kw["cache_implementation"] = "static"  # the decode step compiled with CUDA graphs in the first calls
    rounds = []
    with torch.inference_mode():
        for _ in range(args.rounds):
            clock = _Clock()
            model.generate(prompt, streamer=clock, **kw)
            gaps = [b - a for a, b in zip(clock.times, clock.times[1:])]
            rounds.append({"prefill_s": gaps[0], "per_token_s": gaps[1:], "median_per_token_s": statistics.median(gaps[1:])})
    _write(args, {"rounds": rounds, "tokens": args.tokens, "prompt": args.prompt, "batch": args.gen_batch})


def _write(args, timing: dict) -> None:
    if args.timing:
        json.dump(timing, open(args.timing, "w"), indent=1)
    print(json.dumps({k: v for k, v in timing.items() if not isinstance(v, list)}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["train", "generate", "eager-generate", "serve"])
    p.add_argument("--rounds", type=int, default=4, help="serve: generate() calls")
    p.add_argument("--static", action="store_true", help="serve: a static KV cache (decode under CUDA graphs)")
    p.add_argument("--no-pyprof", action="store_true", help="without pyprof.init()")
    p.add_argument("--no-modules", action="store_true", help="pyprof.init(modules=False)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--gen-batch", type=int, default=4)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--flops", metavar="FILE")
    p.add_argument("--timing", metavar="FILE")
    args = p.parse_args()
    if not args.no_pyprof and not args.flops:
        import pyprof

        pyprof.init(modules=not args.no_modules)
    if args.mode == "train":
        train(args)
    elif args.mode == "serve":
        serve(args)
    else:
        generate(args, static=args.mode == "generate")


if __name__ == "__main__":
    main()
