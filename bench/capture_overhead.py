"""Added cost per torch call of ``pyprof.init()``, against the bare loop and two yardsticks, in one run.

    python bench/capture_overhead.py [--calls 200000]

The loop is ``torch.add(a, b)`` on tiny CPU tensors: the op itself costs about a microsecond, so what is
measured is the wrapper. Yardsticks, each wrapping the same call:
  original - NVIDIA PyProf's approach: ``traceback.extract_stack()`` and a repr'd dict marker per call;
  naive    - a ``json.dumps`` of op, shapes and dtypes and a ``sys._getframe`` call site per call.
Every variant pushes and pops an NVTX range in its own domain. Prints one line per figure: microseconds
per call and the added microseconds over bare (the best of several alternating rounds).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

import nvtx
import torch

import pyprof


def per_call_us(fn, calls: int) -> float:
    """Mean time of one call of ``fn`` over ``calls`` calls, in microseconds."""
    t0 = time.perf_counter()
    fn(calls)
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    opts = parser.parse_args()
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    add = torch.add
    domain = nvtx.get_domain("bench")

    def bare(n):
        for _ in range(n):
            torch.add(a, b)

    def original(n):
        for _ in range(n):
            stack = traceback.extract_stack()
            marker = repr({"mod": "torch", "op": "add", "args": [
                {"type": "tensor", "shape": tuple(a.shape), "dtype": str(a.dtype)},
                {"type": "tensor", "shape": tuple(b.shape), "dtype": str(b.dtype)}],
                "traceMarker": [f"{f.filename}:{f.lineno}" for f in stack]})
            domain.push_range(message=marker)
            add(a, b)
            domain.pop_range()

    def naive(n):
        for _ in range(n):
            f = sys._getframe(0)
            marker = json.dumps({"mod": "torch", "op": "add", "site": f"{f.f_code.co_filename}:{f.f_lineno}",
                                 "args": [[list(a.shape), str(a.dtype)], [list(b.shape), str(b.dtype)]]})
            domain.push_range(message=marker)
            add(a, b)
            domain.pop_range()

    # Rounds alternate the variants so that a busy neighbour slows them all alike; each figure is the
    # best round (the least disturbed), as timeit does.
    results = {"bare": [], "init": [], "original": [], "naive": []}
    if torch.cuda.is_available():
        # On a CUDA build init() also turns on PyTorch's autograd NVTX ranges (one per aten op): show the
        # wrapper's own cost apart from theirs.
        results["init-nobwd"] = []
    for _ in range(opts.rounds):
        results["bare"].append(per_call_us(bare, opts.calls))
        results["original"].append(per_call_us(original, opts.calls // 4))
        results["naive"].append(per_call_us(naive, opts.calls))
        pyprof.init()
        try:
            results["init"].append(per_call_us(bare, opts.calls))
        finally:
            pyprof.uninit()
        if "init-nobwd" in results:
            pyprof.init(backward=False)
            try:
                results["init-nobwd"].append(per_call_us(bare, opts.calls))
            finally:
                pyprof.uninit()
    results = {name: min(times) for name, times in results.items()}
    base = results["bare"]
    print(f"torch {torch.__version__}, nvtx tool attached: {not isinstance(domain, nvtx._lib.DummyDomain)}")
    for name, us in results.items():
        print(f"{name:11s} {us:7.2f} us/call  added {us - base:+6.2f} us/call")
    if "init-nobwd" in results:
        print("init-nobwd: init(backward=False), without PyTorch's autograd NVTX ranges")


if __name__ == "__main__":
    main()
