"""Recommendations: rules that fire on measured facts. Each finding names what it is about (op, line, kernel),
the evidence (times, shares, roofline %, Tensor Core use, the dimensions that matter), an estimate of what
fixing it saves, and what to do; the most at stake first. Each rule checks the data it rests on first (dtypes,
shapes, the GPU's peaks and features, timestamps, launch times); lacking it, it says once in the notes what it
cannot judge and why, instead of a finding. docs/views.md gives every rule's threshold, evidence and the basis
of its saving; docs/actionable.md the reasoning. The rules live in rules_gpu and rules_host."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.tables import Table
from pyprof.prof.views.helpers import ms, pct
from pyprof.prof.views.findings import IDLE_RULES, Ctx, Finding, at_target, misaligned  # noqa: F401  (API)
from pyprof.prof.views.view_registry import view
from pyprof.prof.views.rules_gpu import channels_last, fp32_matmul, hotspots, low_occupancy, memory_bound, \
    tensor_cores
from pyprof.prof.views.rules_host import data_loading, host_copies, idle, optimizer, syncs

RULES = (tensor_cores, fp32_matmul, channels_last, hotspots, memory_bound, optimizer, idle, data_loading, syncs,
         host_copies, low_occupancy)


@view("recommendations")
def recommendations(agg: Aggregate, worker: str | None = None) -> Table:
    """The findings of every rule, the largest estimated saving first; what a rule could not judge, and why,
    in the notes."""
    ws = agg.select(worker)
    cols = [("rule", "Rule"), ("about", "About"), ("evidence", "Evidence"), ("saving_ms", "Saving (ms)"),
            ("saving_pct", "Saving %"), ("action", "Action"), ("time_ms", "Time (ms)"), ("time_pct", "Time %")]
    t = Table.of("recommendations", "Recommendations", cols)
    c = Ctx(agg, ws)
    found: list[Finding] = []
    for rule in RULES:
        found += rule(c)
    # by the saving as shown (0.1 us: sums of floats differ in their last bits with the order they were added
    # in), ties in a fixed order; a saving not estimated sorts as none
    found.sort(key=lambda f: (-round((f.saving_ns or 0.0) / 100), f.rule, f.about))
    for f in found:
        saving = None if f.saving_ns is None else min(f.saving_ns, f.time_ns)
        # Time % is of GPU time for findings about activities; idle time is no GPU time (its share of the span
        # is in the evidence), so na there.
        t.rows.append([f.rule, f.about, f.evidence, ms(saving), pct(saving, c.span_ns or c.gpu_ns), f.action,
                       ms(f.time_ns), None if f.rule in IDLE_RULES else pct(f.time_ns, c.gpu_ns)])
    if c.prefix:
        t.notes.append(f"Lines are relative to {c.prefix}.")
    base = ("the program's own steps (its unprofiled step x the captured steps, where pyprof run measured it)"
            if any(c.programs.values()) else
            "the profiled span (the steps' windows, wall time; GPU time when no step is found)")
    t.notes += ["Saving: what fixing the finding would save at most, by the rule's basis (docs/views.md); "
                f"Saving % is of {base}, "
                "Time % of GPU time (na for the idle rules, whose time is idle time). Findings can overlap (a line's "
                "kernels are also kernels): do not add their savings up.",
                "Pageable vs pinned host memory is not in the records: no rule reads it."]
    t.notes += list(c.notes.values())
    unshown = c.source.note(c.text_asked)
    if unshown:
        t.notes.append(unshown)
    if not found:
        rules = sorted({rule for rule, _ in c.notes})
        t.empty = ("No rule fired" + (f"; {len(rules)} could not judge for want of data ({', '.join(rules)}: the "
                                      "notes say what each lacks)" if rules else "") + ".")
    return t
