"""The marker of one kernel torch.compile's Inductor generated, from the FX nodes it was generated from: the aten
ops it computes, their shapes and dtypes, the user's line of each, and what it moves (docs/markers.md, "Compiled
kernel ranges"). Called at compile time, once per kernel, by pyprof.nvtx.inductor."""
from __future__ import annotations

import re
import weakref

import torch
import torch.fx

from pyprof.nvtx import payload
from pyprof.record import COMPILED_MOD, FUSED_PREFIX, MARKER_VERSION

# A kernel that contains one of these is named by it and modelled as it: its FLOPs are the kernel's.
_MAIN_OPS = re.compile(r"^(mm|addmm|bmm|baddbmm|_scaled_mm|_int_mm|convolution|convolution_backward|"
                       r"_scaled_dot_product_\w+|_flash_attention_\w+|_efficient_attention_\w+|_cudnn_attention\w*)$")
# Nodes that move or make data without arithmetic: no element operations of their own.
_NO_ARITHMETIC = frozenset("""view _unsafe_view reshape slice select expand permute transpose t unsqueeze squeeze clone
    alias as_strided getitem full empty zeros ones arange iota scalar_tensor embedding index gather cat constant_pad_nd
    slice_scatter select_scatter""".split())
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')

_places: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # FX graph -> {node: its place}


def kernel_nodes(node_schedule, is_extern: bool) -> tuple[list, list]:
    """The FX nodes (calls, in graph order) a kernel was generated from, and its scheduler nodes (none for an extern
    call), from what Inductor's provenance hook is given."""
    if is_extern:
        origin = getattr(node_schedule, "origin_node", None)
        nodes = [origin] if origin is not None else sorted(getattr(node_schedule, "origins", ()) or (), key=_order)
        snodes = []
    else:
        snodes = [s for s in node_schedule if getattr(s, "node", None) is not None]
        nodes = sorted({o for s in snodes for o in (getattr(s.node, "origins", None) or ())}, key=_order)
    return [n for n in nodes if getattr(n, "op", None) == "call_function"], snodes


def _order(node) -> tuple:
    # FX nodes sort by their place in the graph (origins are a set); each graph numbered once, not per kernel.
    graph = getattr(node, "graph", None)
    places = _places.get(graph) if graph is not None else None
    if graph is not None and places is None:
        places = _places[graph] = {n: i for i, n in enumerate(graph.nodes)}
    place = places.get(node) if places is not None else None
    return (0, place) if place is not None else (1, getattr(node, "name", ""))


def marker(kernel_name: str, nodes: list, snodes: list, graph, emitter) -> dict:
    """The marker's fields; ``site`` is empty where no node has a user frame (the caller fills it at run time)."""
    main = next((n for n in nodes if _MAIN_OPS.match(_aten_name(n.target))), None)
    fused: list[dict] = []  # the user's ops (before decomposition) the kernel computes, each with its line, once
    for n in nodes:
        original = n.meta.get("original_aten")
        entry = {"op": _aten_name(original if original is not None else n.target)}
        site = _site(n.meta.get("stack_trace"), emitter)
        if site:
            entry["site"] = site
        if entry not in fused:
            fused.append(entry)
    if main is not None:
        op = _aten_name(main.target)
        args = [_arg(a) for a in main.args] + [{"name": k, **_arg(v)}
                                                        for k, v in main.kwargs.items()]
        site = _site(main.meta.get("stack_trace"), emitter)
    else:
        names = []
        for e in fused:
            if e["op"] not in names:
                names.append(e["op"])
        op = FUSED_PREFIX + "+".join(names)
        args = _io(snodes, graph, nodes)
        site = next((e["site"] for e in reversed(fused) if "site" in e), None)
    return {"pyprof": MARKER_VERSION, "mod": COMPILED_MOD, "op": op, "args": args, "site": site or "",
            "kernel": kernel_name, "graph": "backward" if getattr(graph, "is_backward", False) else "forward",
            "graph_id": _compile_id(), "fused": fused}


def _compile_id() -> str:
    """Dynamo's id of the compilation (``0/0``: frame 0, first compile): a forward graph and its backward share it."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except (ImportError, AttributeError):
        cid = None
    return "" if cid is None else str(cid)


def _aten_name(target) -> str:
    # aten.mm.default -> "mm"; a Python callable (operator.getitem) by its name.
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", None) or str(target)
    return name.split("::")[-1]


def _site(stack_trace: str | None, emitter) -> str | None:
    """The innermost frame of an FX node's stack trace outside torch and pyprof, as ``file:line``."""
    if not stack_trace:
        return None
    for path, line in reversed(_FRAME.findall(stack_trace)):
        if not emitter.is_internal(path):
            return f"{path}:{line}"
    return None


def _arg(a) -> dict:
    if isinstance(a, torch.fx.Node):
        return _value(a.meta.get("val"))
    if isinstance(a, (list, tuple)) and any(isinstance(x, torch.fx.Node) for x in a):
        return {"type": "tensorlist", "items": [_value(x.meta.get("val")) for x in a
                                                if isinstance(x, torch.fx.Node)]}
    return payload.describe(_concrete(a))


def _value(val) -> dict:
    if isinstance(val, torch.Tensor):
        entry = {"type": "tensor", "shape": [_int(s) for s in val.shape],
                 "dtype": str(val.dtype).removeprefix("torch.")}
        try:
            entry["contig"] = bool(val.is_contiguous())
        except (RuntimeError, TypeError, ValueError):
            pass
        return entry
    return payload.describe(_concrete(val))


def _concrete(a):
    if isinstance(a, (list, tuple)):
        return type(a)(_concrete(x) for x in a) if not hasattr(a, "_fields") else a
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return _int(a)
    return a


def _int(s) -> int | str:
    """A size as an int: its value, or for a symbolic size the hint Inductor compiles for."""
    try:
        return int(s)
    except (TypeError, ValueError, RuntimeError):
        pass
    try:
        from torch._inductor.virtualized import V

        sizevars = V.graph.sizevars
        expr = s.node.expr if hasattr(s, "node") else s
        for name in ("size_hint", "optimization_hint"):  # renamed between PyTorch 2.11 and 2.13
            hint = getattr(sizevars, name, None)
            if hint is not None:
                return int(hint(expr))
    except Exception:  # noqa: BLE001 - an unbacked size has no hint: the marker says what it is
        pass
    return str(s)


def _io(snodes: list, graph, nodes: list) -> list:
    """What a fused kernel moves: the elements it reads of each buffer made outside it (``in``) and writes of each
    buffer used outside it (``out``), as tensor entries of that many elements; and ``elementwise``, the elements
    its fused nodes process."""
    made: dict = {}
    members = set(snodes)
    for s in snodes:
        for out in s.get_outputs():
            made[out.get_name()] = out
    reads: dict = {}  # buffer -> the most elements one access reads (several accesses of a buffer hit the cache)
    writes: dict = {}
    for s in snodes:
        for dep in s.read_writes.reads:
            if dep.name not in made:
                reads[dep.name] = max(reads.get(dep.name, 0), _elements(dep, graph))
        for dep in s.read_writes.writes:
            writes[dep.name] = max(writes.get(dep.name, 0), _elements(dep, graph))
    outputs = set(graph.get_output_names()) if hasattr(graph, "get_output_names") else set()
    kept = {name for name, out in made.items()
            if name in outputs or any(getattr(u, "node", None) not in members for u in getattr(out, "users", ()))}
    entries = [e for e in (_buffer(graph, n, count, "in") for n, count in reads.items()) if e is not None]
    entries += [e for e in (_buffer(graph, n, count, "out") for n, count in writes.items() if n in kept)
                if e is not None]
    elements = 0
    for n in nodes:  # each node's work: the larger of its output and its largest tensor input
        if _aten_name(n.target) in _NO_ARITHMETIC:
            continue
        sizes = [_numel(n.meta.get("val"))] + [_numel(a.meta.get("val")) for a in n.args
                                                if isinstance(a, torch.fx.Node)]
        elements += max(sizes)
    entries.append({"name": "elementwise", "type": "int", "value": elements})
    return entries


def _elements(dep, graph) -> int:
    """How many elements of its buffer one access reads or writes: those its index reaches (a broadcast reads
    fewer than it loops over); for a gather (an index read from another tensor, as an embedding's) one per
    iteration, at most the buffer. 0 for a dependency on the whole buffer that loads nothing by itself (the
    buffer a scatter adds into: its store is counted where it is written), or where unknown."""
    from torch._inductor.dependencies import MemoryDep

    try:
        whole = _int(graph.get_numel(dep.name))
        if isinstance(dep, MemoryDep):
            if dep.is_indirect():
                count = 1
                for size in dep.ranges.values():
                    count *= _int(size)
            else:
                count = _int(dep.get_numel())
            return min(count, whole)
        return 0
    except Exception:  # noqa: BLE001 - a symbolic size without a hint: the buffer is left out of the bytes
        return 0


def _numel(val) -> int:
    count = 1
    for d in getattr(val, "shape", None) or ():
        d = _int(d)
        count *= d if isinstance(d, int) else 0
    return count if getattr(val, "shape", None) is not None else 0


def _buffer(graph, name: str, count, role: str) -> dict | None:
    if not isinstance(count, int) or count <= 0:
        return None
    try:
        dtype = str(graph.get_dtype(name)).removeprefix("torch.")
    except Exception:  # noqa: BLE001 - a buffer without a dtype is left out of the bytes
        return None
    return {"name": role, "type": "tensor", "shape": [count], "dtype": dtype}
