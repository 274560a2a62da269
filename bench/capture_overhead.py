"""Added cost per torch call of ``pyprof.init()``, against the bare loop and two yardsticks, in one run.

    python bench/capture_overhead.py [--calls 200000]

The loop is ``torch.add(a, b)`` on tiny CPU tensors: the op itself costs about a microsecond, so what is
measured is the wrapper. Yardsticks, each wrapping the same call:
  original - NVIDIA PyProf's approach: ``traceback.extract_stack()`` and a repr'd dict marker per call;
  naive    - a ``json.dumps`` of op, shapes and dtypes and a ``sys._getframe`` call site per call.
Every variant pushes and pops an NVTX range in its own domain. Prints one line per figure: microseconds
per call and the added microseconds over bare (the median of several repeats).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import nvtx
import torch

import pyprof


def per_call_us(fn, calls: int, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean time of one call of ``fn``, in microseconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(calls)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
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

    base = per_call_us(bare, opts.calls)
    results = {"bare": base, "original": per_call_us(original, opts.calls // 4),
               "naive": per_call_us(naive, opts.calls)}
    pyprof.init()
    try:
        results["init"] = per_call_us(bare, opts.calls)
    finally:
        pyprof.uninit()
    results["bare-after"] = per_call_us(bare, opts.calls)
    print(f"torch {torch.__version__}, nvtx tool attached: {not isinstance(domain, nvtx._lib.DummyDomain)}")
    for name, us in results.items():
        print(f"{name:11s} {us:7.2f} us/call  added {us - base:+6.2f} us/call")


if __name__ == "__main__":
    main()
