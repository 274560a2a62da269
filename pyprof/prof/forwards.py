"""The forwards of an inference loop (pyprof.forward_steps, ``pyprof run --forward-steps``: each step is one outermost
module call), told apart as prefill or decode by the tokens their embedding lookup read, and the time per output
token they give."""
from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from pyprof.prof.steps import steps


@dataclass(frozen=True)
class Forwards:
    """A worker's forward steps: each step's kind, and the counts and times the overview states (ns)."""

    kinds: dict  # step label -> "prefill" or "decode"; steps without an embedding lookup are left out
    tokens: dict  # step label -> tokens its embedding lookup read
    prefills: int
    decodes: int
    decode_tokens: int  # tokens of one decode forward (one per sequence)
    decode_span_ns: float | None  # median captured span of the decode forwards


def forwards(w) -> Forwards | None:
    """The worker's Forwards, or None where its steps are not forwards (no program line timed per forward, or no
    ProfilerStep ranges). Decode forwards are those that read the fewest tokens, prefills those that read more;
    with one token count throughout there are neither (every forward alike)."""
    if not any(r.unit == "forward" for r in w.program):
        return None
    sts, source = steps(w)
    if source != "ProfilerStep" or not sts:
        return None
    tokens = {f"ProfilerStep#{k}": n for k, n in w.step_tokens.items() if n > 0}
    counts = [tokens[s.label] for s in sts if s.label in tokens]
    if not counts or min(counts) == max(counts):
        return Forwards({}, tokens, 0, 0, min(counts) if counts else 0, None)
    low = min(counts)
    kinds = {s.label: "decode" if tokens[s.label] == low else "prefill" for s in sts if s.label in tokens}
    spans = [s.span_ns for s in sts if kinds.get(s.label) == "decode"]
    return Forwards(kinds, tokens, sum(1 for k in kinds.values() if k == "prefill"), len(spans), low,
                    median(spans) if spans else None)


__all__ = ["Forwards", "forwards"]
