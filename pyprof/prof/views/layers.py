"""The layer tree: GPU time per ``layer:`` range / module path, inclusive of the layers inside it, with
FLOPs, roofline and TC share; backward kernels charged to their forward op's layer."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.table.groups import Group
from pyprof.prof.tables import Table
from pyprof.prof.user_ranges import USER_RANGE
from pyprof.prof.views.view_registry import view
from pyprof.prof.views.helpers import merged, modelled_cols, ms, pct, total

NO_LAYER = "(no layer)"


@view("layers")
def layers(agg: Aggregate, worker: str | None = None) -> Table:
    """One row per node of the layer tree, depth-first, children longest first."""
    ws = agg.select(worker)
    cols = [("layer", "Layer"), ("depth", "Depth"), ("path", "Path"), ("kernels", "Kernels"),
            ("gpu_ms", "GPU (ms)"), ("self_ms", "Self (ms)"), ("time_pct", "Time %"), ("flops", "FLOPs"),
            ("tflops", "TFLOP/s"), ("roofline_pct", "Roofline %"), ("tc_pct", "TC %")]
    t = Table.of("layers", "Layers", cols, tree_column="depth",
                 chart={"type": "bar", "label": "layer", "values": ["self_ms"]})
    own = merged(ws, "layers")
    incl: dict[tuple, Group] = {}  # path -> its own groups and those of the layers inside it
    children: dict = {}
    for path, g in own.items():
        path = path or (NO_LAYER,)
        for d in range(1, len(path) + 1):
            node = path[:d]
            acc = incl.get(node)
            if acc is None:
                acc = incl[node] = Group()
                children.setdefault(node[:-1], []).append(node)
            acc.merge(g)
    gpu_ns = total(ws, "gpu_ns")

    def self_ns(node) -> int:
        g = own.get(() if node == (NO_LAYER,) else node)
        return g.ns if g else 0

    stack = sorted(children.get((), []), key=lambda n: incl[n].ns)
    while stack:
        node = stack.pop()
        g = incl[node]
        ns = g.ns
        t.rows.append([node[-1], len(node) - 1, "/".join(node), g.count, ms(ns), ms(self_ns(node)),
                       pct(ns, gpu_ns)] + modelled_cols(g))
        stack.extend(sorted(children.get(node, []), key=lambda c: incl[c].ns))
    t.notes += [
        "GPU (ms) includes the layers inside; Self (ms) is time launched directly in the layer. The roots add up to "
        "all GPU time. Layers are pyprof module ranges and 'layer:' ranges; a backward kernel counts in its forward "
        "op's layer.", "Roofline % and TC %: as in the operators view."]
    if any(name.startswith(USER_RANGE) for path in own for name in path):
        t.notes.append(f"'{USER_RANGE}NAME' layers are user ranges (record_function, NVTX): they hold the "
                       "activities that no op encloses and that have no layer of their own; kernels of ops inside "
                       "such a range are not counted in it (the record does not say which of an op's enclosing "
                       "ranges are the user's).")
    return t
