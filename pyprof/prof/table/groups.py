"""The one group-by: what a group of GPU activities adds up to (``Group``), what one activity adds (``Sample``),
and the keys activities are grouped by. ``pyprof prof --group-by`` (pyprof.prof.table.summary) and the views'
pass (pyprof.prof.aggregate: operators, kernels, lines, layers) add every activity here and read the same
fields, so a number means the same in a ``--group-by`` table and in a view.

Keys: a backward kernel is charged to the forward op it belongs to (``linear (bprop)``), and takes its forward
op's layer, call site and input shapes; kernels group by their full (demangled) name, since two kernels that
share a short name (cutlass ``Kernel2<...>``, ``elementwise_kernel<...>``) are different code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, NamedTuple

from pyprof.common import BoundedDict
from pyprof.prof.model.modeller import json_key
from pyprof.prof.model.results import first_name
from pyprof.prof.model.tensorcores import NAME_SCAN_CHARS
from pyprof.prof.user_ranges import range_layers, range_op
from pyprof.record import COMPILED_MOD

TINY_NS = 10_000  # a kernel shorter than 10 us is launch-bound territory (docs/actionable.md, 3)


class Sample(NamedTuple):
    """What one GPU activity adds to each of its groups, computed once per activity (``sample``)."""

    ns: int
    flops: int  # 0 when not modelled (``modelled`` tells it from a modelled 0)
    modelled: bool  # its FLOPs are modelled
    ideal_ns: float  # the time it would take at the GPU's roofline: roofline % x duration (0 when unknown; on_grid)
    tc_ns: int  # its duration when it ran on Tensor Cores, else 0
    tc_able_ns: int  # its duration when Tensor Cores apply to it (used or not), else 0
    roof_ns: int  # its duration when its roofline is known, else 0
    tiny: bool  # a kernel under TINY_NS
    backward: bool
    optimizer: bool  # work of an optimizer step (is_optimizer): neither forward nor backward
    comm: bool  # a communication kernel (is_comm)


# Optimizer work: PyTorch's own range around every optimizer's step (``Optimizer.step#AdamW.step``), and the
# multi-tensor ops that only optimizers (and grad clipping, their neighbour) call.
OPTIMIZER_RANGE = "Optimizer.step"
OPTIMIZER_OPS = ("_foreach_", "_fused_")
_OPTIM_MODULE = "torch.optim."
#: foreach ops that say nothing of an optimizer outside its range: a serving engine copies a batch's inputs into
#: its CUDA graph's buffers with _foreach_copy_ (SGLang's cuda_graph_runner)
_NOT_OPTIMIZER_ALONE = ("_foreach_copy_",)


def is_optimizer(d: dict) -> bool:
    """True for an activity of an optimizer step: a ``_foreach_*``/``_fused_*`` op (but ``_foreach_copy_``), or an
    op under PyTorch's ``Optimizer.step#...`` range that autograd did not record and no module ran (an optimizer's
    per-parameter loop of plain ops: ``step`` runs under no_grad). Lightning, and any ``optimizer.step(closure)``,
    run the whole training step inside that range: its forward ops carry an autograd sequence number or a module."""
    first = first_name(d.get("op"))
    if isinstance(first, str) and first.startswith(OPTIMIZER_OPS) and not first.startswith(_NOT_OPTIMIZER_ALONE):
        return True
    for name in d.get("ranges") or ():
        # Nsight Systems' functions-trace names the step by its Python function: torch.optim.AdamW.step
        if isinstance(name, str) and (name.startswith(OPTIMIZER_RANGE) or name.startswith(_OPTIM_MODULE)
                                      and name.endswith(".step")):
            return not d.get("seqId") and not d.get("layer")
    return False


#: Ideal times are kept on a grid of 2**-10 ns (about a picosecond). A sum of such numbers is exact in floating point,
#: whatever order it is added up in, while it stays under 2**43 ns (2.4 hours): a group's Roofline% is then the same
#: from one process as from workers that each add up a chunk of the input (pyprof.prof.table.parallel, aggregate_jobs).
IDEAL_GRID = 1024


def on_grid(ns: float) -> float:
    """``ns`` rounded to the nearest multiple of 1 / IDEAL_GRID."""
    return round(ns * IDEAL_GRID) / IDEAL_GRID


def sample(d: dict, m, roof) -> Sample:
    """The Sample of a record ``d`` with its model result ``m`` and roofline ``roof`` (pyprof.prof.table.rows)."""
    dur = d.get("kDuration") or 0
    pct = roof.roofline_pct
    roof_ns = dur if pct is not None else 0
    # tuple.__new__: this runs once per activity of the views' pass, and skips the named tuple's own __new__
    backward = d.get("dir") == "bprop"
    return _new_tuple(Sample, (dur, m.flops or 0, m.flops is not None, on_grid(pct * dur / 100.0) if roof_ns else 0.0,
                               dur if m.tc else 0, dur if m.tc is not None else 0, roof_ns,
                               dur < TINY_NS and d.get("kind") not in _COPIES, backward,
                               not backward and is_optimizer(d), is_comm(d.get("kShortName"), d.get("kLongName"))))


_new_tuple = tuple.__new__


# DeepEP's expert-parallel all-to-all (``deep_ep::intranode::dispatch``, ``...internode::combine``,
# ``...internode_ll::...``, and their ``notify``/``cached_notify`` set-up; DeepSeek's own build names the namespace
# ``dpsk::ep``): kernels that move tokens between GPUs over NVLink and RDMA, as NCCL's do. Their short names
# (``combine``, ``dispatch``) say nothing, so the full name is read. ``ep::cuda::get_dispatch_layout`` only counts
# tokens on the GPU: not communication.
_EP_COMM = re.compile(r"\bep::(?:inter|intra)node(?:_ll)?::")
# All-reduces that run outside NCCL, over symmetric memory and NVLink: PyTorch's symm_mem ops
# (``multimem_all_reduce_kernel``, ``one_shot_all_reduce_kernel``, ``two_shot_all_reduce_kernel_inplace``, as vLLM
# runs them for tensor parallelism on Hopper and Blackwell) and vLLM's own custom all-reduce
# (``cross_device_reduce_1stage``). Each waits on its peers as a NCCL kernel does. Told by the short name's start.
_P2P_COMM = ("multimem_all_reduce", "multimem_one_shot_all_reduce", "multimem_all_gather", "one_shot_all_reduce",
             "two_shot_all_reduce", "cross_device_reduce_")


def is_comm(short_name: str | None, full_name: str | None = None) -> bool:
    """True for a communication kernel: NCCL's (``ncclDevKernel_AllReduce_...``, ``ncclKernel_SendRecv_...``) and
    RCCL's, which keeps NCCL's names (HTA's rule is ``^nccl.*Kernel``: the same kernels), the symmetric-memory
    all-reduces of _P2P_COMM, and DeepEP's all-to-all, told by its full name. The one rule of every view. Once
    per kernel record: the substring test keeps the regex (7 us on a long name) to DeepEP's names, whose answers
    are cached."""
    if type(short_name) is str and (short_name[:4].lower() == "nccl" or short_name.startswith(_P2P_COMM)):
        return True
    return type(full_name) is str and "ep::" in full_name and _ep_comm(full_name[:NAME_SCAN_CHARS])


@lru_cache(maxsize=4096)
def _ep_comm(name: str) -> bool:
    return _EP_COMM.search(name) is not None


_COPIES = ("memcpy", "memset")  # any other kind (a kernel, or a kind a newer writer adds) is a kernel here


@dataclass(slots=True, eq=False)
class Group:
    """The sums of one group's activities. Every grouped table reads these; a table that does not show a field
    pays one addition for it."""

    calls: int = 0  # op calls that started in the group (pyprof.prof.aggregate's call rule; 0 in --group-by)
    count: int = 0  # activities: kernels, copies and memsets
    ns: int = 0
    flops: int = 0
    modelled: int = 0  # activities whose FLOPs are modelled: without any, the group's FLOPs are na, not 0
    ideal_ns: float = 0.0
    tc_ns: int = 0
    tc_able_ns: int = 0  # time of the activities Tensor Cores apply to: without any, the group's TC % is na
    roof_ns: int = 0  # time of the activities whose roofline is known: without any, the group's roofline is na
    tiny: int = 0
    tiny_ns: int = 0
    fwd_ns: int = 0  # time of forward (and undirected) activities, optimizer steps' left out
    bwd_ns: int = 0
    opt_ns: int = 0  # time of optimizer steps' activities
    min_ns: int | None = None  # kept by add_extremes
    max_ns: int | None = None
    occ_x_ns: float = 0.0  # estimated occupancy x duration, over the kernels whose occupancy is known
    occ_ns: int = 0  # the duration of those kernels
    bytes: int = 0  # bytes copied (the copies between host and device)
    host_ns: int = 0  # CPU time of the op calls that started in the group (their op's range, once per call)
    comm_ns: int = 0  # time of its communication kernels (is_comm)

    def add(self, s: Sample, new_call: int = 0) -> None:
        ns = s.ns
        self.calls += new_call
        self.count += 1
        self.ns += ns
        self.flops += s.flops
        self.modelled += s.modelled
        self.ideal_ns += s.ideal_ns
        self.tc_ns += s.tc_ns
        self.tc_able_ns += s.tc_able_ns
        self.roof_ns += s.roof_ns
        if s.tiny:
            self.tiny += 1
            self.tiny_ns += ns
        if s.comm:
            self.comm_ns += ns
        if s.backward:
            self.bwd_ns += ns
        elif s.optimizer:
            self.opt_ns += ns
        else:
            self.fwd_ns += ns

    def add_extremes(self, ns: int) -> None:
        """The shortest and longest activity (the kernels view's Min and Max: only its groups keep them)."""
        if self.min_ns is None or ns < self.min_ns:
            self.min_ns = ns
        if self.max_ns is None or ns > self.max_ns:
            self.max_ns = ns

    def add_occupancy(self, occ_x_ns: float, ns: int) -> None:
        """A kernel's estimated occupancy x duration, and its duration (kernels whose estimate is known)."""
        self.occ_x_ns += occ_x_ns
        self.occ_ns += ns

    def merge(self, other: "Group") -> None:
        """Add another group's sums (the same key in another worker, or another kernel of a short name)."""
        for name in _SUMS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.min_ns is not None and (self.min_ns is None or other.min_ns < self.min_ns):
            self.min_ns = other.min_ns
        if other.max_ns is not None and (self.max_ns is None or other.max_ns > self.max_ns):
            self.max_ns = other.max_ns

    def copy(self) -> "Group":
        out = Group()
        out.merge(self)
        return out

    @property
    def roofline_pct(self) -> float | None:
        """Time at the roofline over measured time, in percent; None when no activity's roofline is known."""
        return 100.0 * self.ideal_ns / self.ns if self.ns and self.roof_ns else None

    @property
    def known_flops(self) -> int | None:
        """The group's FLOPs; None when no activity's are modelled (0 is a modelled 0: a copy, a gather)."""
        return self.flops if self.modelled else None

    @property
    def tflops(self) -> float | None:
        """Achieved TFLOP/s; None without FLOPs: a rate of no floating-point work would read as slow work."""
        return self.flops / self.ns / 1e3 if self.flops and self.ns else None

    @property
    def comm_pct(self) -> float | None:
        """Share of the group's time in communication kernels (is_comm: NCCL's, RCCL's, DeepEP's), in percent; None
        without time."""
        return 100.0 * self.comm_ns / self.ns if self.ns else None

    @property
    def tc_pct(self) -> float | None:
        """Share of the group's time in kernels that ran on Tensor Cores, in percent; None when Tensor Cores
        apply to none of its activities (copies, pointwise kernels: 0% would read as a missed chance)."""
        return 100.0 * self.tc_ns / self.ns if self.ns and self.tc_able_ns else None


_SUMS = tuple(n for n in Group.__slots__ if n not in ("min_ns", "max_ns"))


def add(groups: dict, key, s: Sample, new_call: int = 0) -> Group:
    """Add ``s`` to the group ``key`` of ``groups`` (made on first sight: tables list groups in that order among
    equal times). Returns the group."""
    g = groups.get(key)
    if g is None:
        g = groups[key] = Group()
    g.add(s, new_call)
    return g


def merged(parts: list[dict]) -> dict:
    """The groups of several dicts summed key by key (the same dict when there is one)."""
    if len(parts) == 1:
        return parts[0]
    out: dict = {}
    for groups in parts:
        for k, g in groups.items():
            merge_into(out, k, g)
    return out


def merge_into(groups: dict, key, g: Group) -> None:
    """Add group ``g`` to the group ``key`` of ``groups`` (a copy of ``g`` on first sight)."""
    cur = groups.get(key)
    if cur is None:
        groups[key] = g.copy()
    else:
        cur.merge(g)


# ---- the keys


def op_key(d: dict) -> str:
    """The op of an activity: a copy or memset its kind; a backward kernel its forward op's name with
    " (bprop)" ("linear (bprop)" says more than the aten op inside the autograd node, "mm"), except a compiled
    backward graph's kernel, named by its own op ("mm (bprop)"); a forward op run
    again during backward (activation checkpointing) "op (recompute)"."""
    if d.get("kind", "kernel") != "kernel":
        return d.get("kind") or "na"
    op = first_name(d.get("op"))
    if op is None:
        # No op encloses it: the user's innermost range names it, marked (pyprof.prof.user_ranges)
        op = range_op(d) or "na"
    if d.get("dir") == "bprop":
        fwd = d.get("fwd")
        if first_name(d.get("mod"), "") == COMPILED_MOD:
            # A kernel of a compiled backward graph names what it computes itself (its forward link is the whole
            # compiled region's).
            fwd = None
        # Backward work without a forward link (AccumulateGrad, a node whose forward op is not in the capture)
        # stays apart from the forward op of the same name; a custom Function's own node is its Function's.
        return f"{first_name(fwd.get('op'), op) if fwd else _function_of_node(op, d)} (bprop)"
    if d.get("recompute"):
        return f"{op} (recompute)"
    return op


#: PyTorch names the backward node of a custom ``torch.autograd.Function`` ``<Function>Backward`` (its built-in
#: nodes end in a number: ``MulBackward0``; a C++ Function's is ``CppNode<...>``).
_FUNCTION_NODE = "Backward"


def _function_of_node(op: str, d: dict) -> str:
    """The custom Function whose autograd node ``op`` is (``DropoutAddLayerNormFnBackward`` ->
    ``DropoutAddLayerNormFn``): the name its kernels that do link to the forward op are shown under. Any other
    op as it is."""
    if op.endswith(_FUNCTION_NODE) and len(op) > len(_FUNCTION_NODE) and first_name(d.get("mod"), "") == "autograd":
        return op[:-len(_FUNCTION_NODE)]
    return op


def callsite_key(d: dict) -> str:
    """The user's ``file:line`` that launched it; a backward kernel runs on the autograd thread, far from any user
    line: its line is the forward call's. "-" when none is recorded."""
    fwd = d.get("fwd")
    return d.get("callsite") or (fwd.get("callsite") if fwd else None) or "-"


def layer_path(d: dict) -> list:
    """The record's layer path (outermost first); a backward kernel's is its forward op's. Without either, an
    activity that no op encloses takes the user ranges around it (``range:NAME``, pyprof.prof.user_ranges)."""
    layer = d.get("layer")
    if not layer and d.get("fwd"):
        layer = d["fwd"].get("layer")
    return layer or range_layers(d)


def layer_key(d: dict) -> str:
    return ":".join(layer_path(d)) or "-"


def kernel_key(d: dict) -> str:
    """A kernel's group: its full name (the short one when the record has no other)."""
    return d.get("kLongName") or d.get("kShortName") or "na"


def dir_key(d: dict) -> str:
    return d.get("dir") or "na"


_shapes_cache = BoundedDict(100_000)  # argument bytes -> shapes_key


def shapes_key(d: dict) -> str:
    """The op's input shapes as the PyTorch profiler's "Operator + Input Shape" shows them: one entry per
    argument, a tensor's shape, a list of tensors' shapes, ``[]`` for anything else. A backward kernel's are
    its forward op's."""
    args = d.get("args")
    if d.get("dir") == "bprop" and d.get("fwd"):
        args = d["fwd"].get("args")
    if not args:
        return "[]"
    try:  # the same arguments repeat across steps: build each string once
        ck = json_key(args)
    except TypeError:
        return _shapes(args)
    hit = _shapes_cache.get(ck)
    if hit is None:
        hit = _shapes(args)
        _shapes_cache.add(ck, hit)
    return hit


def _shapes(args) -> str:
    out = []
    for a in args or ():
        if type(a) is dict:
            if "shape" in a:
                out.append(a["shape"])
                continue
            items = a.get("items")
            if items and type(items) is list:
                out.append([i.get("shape", []) if type(i) is dict else [] for i in items])
                continue
        out.append([])
    return str(out)


class GroupBy(NamedTuple):
    """A ``--group-by`` key: its function of a record, and the record keys that function reads (lean decoding,
    pyprof.prof.table.summary, builds only these, SAMPLE_KEYS and the model's; a forward link keeps the parts
    reader.lean_loads keeps, which cover every key function's)."""

    key: Callable[[dict], str]
    reads: tuple[str, ...]


#: The record keys ``sample`` reads (is_optimizer's among them).
SAMPLE_KEYS = ("kDuration", "kind", "dir", "op", "ranges", "seqId", "layer", "kShortName", "kLongName")

#: ``pyprof prof --group-by`` keys.
GROUP_KEYS: dict[str, GroupBy] = {
    "op": GroupBy(op_key, ("kind", "op", "dir", "fwd", "mod", "recompute", "ranges")),
    "layer": GroupBy(layer_key, ("layer", "fwd", "op", "ranges")),
    "kernel": GroupBy(kernel_key, ("kLongName", "kShortName")),
    "callsite": GroupBy(callsite_key, ("callsite", "fwd")),
    "dir": GroupBy(dir_key, ("dir",)),
}


# ---- labels

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_NOISE = frozenset({"void", "const", "int", "unsigned", "long", "bool", "char", "float", "double", "anonymous",
                    "namespace", "at", "native", "std", "c10", "true", "false", "lambda", "operator", "type",
                    "enable_if", "cutlass", "cute", "detail"})


def kernel_labels(names: dict) -> dict:
    """A label per kernel for tables: ``names`` maps a full name to its short name. The label is the short
    name when no other kernel has it; otherwise the short name and, in brackets, the first word of the
    full name's template arguments and parameters that no other kernel of that short name has
    (``elementwise_kernel<direct_copy_kernel_cuda>``), or its rank among them (``Kernel2<#2>``)."""
    by_short: dict = {}
    for full, short in names.items():
        by_short.setdefault(short or full, []).append(full)
    out: dict = {}
    for short, fulls in by_short.items():
        if len(fulls) == 1:
            out[fulls[0]] = short
            continue
        words = {f: _words(f, short) for f in fulls}
        for rank, f in enumerate(sorted(fulls), 1):
            others = set().union(*(set(words[g]) for g in fulls if g != f))
            tell = next((w for w in words[f] if w not in others and w not in _NOISE), None)
            out[f] = f"{short}<{tell if tell is not None else '#' + str(rank)}>"
    return out


def _words(full: str, short: str) -> list[str]:
    """The words of a full kernel name after its short name (its template arguments and parameters); none for a
    name left mangled, whose arguments are not words (``...kentryILi1ENS_12Rmsnorm2dFwd...``): its rank tells it."""
    if full.startswith("_Z"):
        return []
    at = full.find(short)
    return _TOKEN.findall(full[at + len(short):] if at >= 0 else full)
