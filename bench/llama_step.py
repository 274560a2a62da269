"""A Hugging Face Llama training step (bf16 autocast, SDPA with grouped-query attention, fused AdamW), timed by the
script itself with CUDA events, one per step end on the current stream: the program's own step, to compare with
what ``pyprof run`` says of it in the same process (its program line, docs/capture.md).

    python bench/llama_step.py --steps 20                                   # bare
    pyprof run --backend nsys -o out --warmup 5 --steps 3 -- python bench/llama_step.py --steps 20
    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi ... python bench/llama_step.py --pyprof-step 5,3
                    # pyprof.init() and pyprof.step(warmup=5, steps=3) in the script: no pyprof run

Prints one line per figure: each step's time, then the median of the steps pyprof run left unprofiled (read from
its $PYPROF_RUN_WARMUP / $PYPROF_RUN_STEPS: steps 2..warmup and warmup+steps+2..end) and of the captured ones, and
their ratio. Bare, every step from the 2nd is unprofiled. Without CUDA it runs a tiny model on the CPU with
perf_counter (a smoke test, not a measurement).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def _model(device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    small = device == "cpu"
    config = LlamaConfig(vocab_size=1024 if small else 32000, hidden_size=64 if small else 1024,
                         intermediate_size=128 if small else 2816, num_hidden_layers=2 if small else 8,
                         num_attention_heads=4 if small else 16, num_key_value_heads=2 if small else 4,
                         max_position_embeddings=512, attn_implementation="sdpa")
    return LlamaForCausalLM(config).to(device), config


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--pyprof-step", metavar="WARMUP,STEPS",
                   help="call pyprof.init() before the loop and pyprof.step(warmup=WARMUP, steps=STEPS) after "
                        "each step")
    args = p.parse_args()
    window = None
    if args.pyprof_step:
        import pyprof

        warmup, steps = (int(x) for x in args.pyprof_step.split(","))
        window = {"warmup": warmup, "steps": steps}
        os.environ["PYPROF_RUN_WARMUP"], os.environ["PYPROF_RUN_STEPS"] = str(warmup), str(steps)
        pyprof.init()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    model, config = _model(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    seq = args.seq if cuda else 32
    ids = torch.randint(0, config.vocab_size, (args.batch, seq), device=device)
    ends = []  # one mark per step end: a CUDA event on the current stream, or perf_counter_ns
    for _ in range(args.steps):
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            ends.append(torch.cuda.Event(enable_timing=True))
            ends[-1].record()
        else:
            ends.append(time.perf_counter_ns())
        if window is not None:
            pyprof.step(**window)
    if cuda:
        torch.cuda.synchronize()
        step_ms = [a.elapsed_time(b) for a, b in zip(ends, ends[1:])]
    else:
        step_ms = [(b - a) / 1e6 for a, b in zip(ends, ends[1:])]
    # step_ms[i] is step i + 2 (1-based): the first step has no start
    for i, ms in enumerate(step_ms, 2):
        print(f"llama_step: step {i} {ms:.3f} ms ({'cuda events' if cuda else 'perf_counter, CPU'})")
    warmup, steps = int(os.environ.get("PYPROF_RUN_WARMUP", args.steps)), int(os.environ.get("PYPROF_RUN_STEPS", 0))
    captured = set(range(warmup + 1, warmup + steps + 1)) if "PYPROF_RUN_STEPS" in os.environ else set()
    # left out as pyprof run leaves them out: the first after the capture, and the torch profiler's warm-up step
    left_out = ({warmup + steps + 1} if captured else set()) | (
        {warmup} if os.environ.get("PYPROF_RUN_BACKEND") == "torch" else set())
    unprofiled = [ms for i, ms in enumerate(step_ms, 2) if i not in captured | left_out]
    on = [ms for i, ms in enumerate(step_ms, 2) if i in captured]
    if unprofiled:
        print(f"llama_step: unprofiled median {statistics.median(unprofiled):.3f} ms over {len(unprofiled)} steps")
    if on and unprofiled:
        u, c = statistics.median(unprofiled), statistics.median(on)
        # this script's mark follows opt.step(), whose hook ends the capture after pyprof run's own mark: its last
        # captured step holds the capture's end, which pyprof run charges to the next step (left out)
        print(f"llama_step: captured median {c:.3f} ms over {len(on)} steps (the last holds the capture's end); "
              f"captured / unprofiled {c / u:.2f}x")


if __name__ == "__main__":
    main()
