"""One streaming pass over parse's records that models each kernel once (pyprof.prof's Modeller and roofline,
as ``pyprof prof`` does) and keeps what every view needs: per-worker groups (by op, op + input shapes, kernel
name, source line, layer path) and, per GPU activity, only its interval, launch time, step label and two
estimates in flat arrays (the overview merges intervals per step, which needs every interval; docs/views.md).

Nothing holds the record dicts: 1M records cost the arrays (about 55 bytes each) plus the groups.
"""
from __future__ import annotations

import re
from array import array
from math import prod
from typing import Callable, Iterable

import numpy as np

from pyprof.common import BoundedDict, UsageError
from pyprof.prof.model.args import dtype_info
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.coverage import Coverage
from pyprof.common import no_cyclic_gc
from pyprof.parse.readers.activities import GRAPH_LAUNCH_APIS
from pyprof.prof.table.rows import rows
from pyprof.prof.model.roofline import Peaks, roofline
from pyprof.prof.source_lines import SourceText
from pyprof.prof.step_marker import NO_STEP, StepMarker, unmarked
from pyprof.prof.user_ranges import USER_RANGE, range_push_ns
from pyprof.prof.table.groups import OPTIMIZER_RANGE, Group, add, callsite_key, kernel_key, layer_path, \
    merge_into, on_grid, op_key, sample, shapes_key
from pyprof.prof.model.registry import TC_FAMILIES, Family
from pyprof.prof.model.results import as_list
from pyprof.prof.model.occupancy import kernel_occupancy, limits, sm_fraction

KERNEL, MEMCPY, MEMSET = 0, 1, 2
_KIND = {"kernel": KERNEL, "memcpy": MEMCPY, "memset": MEMSET}
_PROFILER_STEP = "ProfilerStep#"
# User ranges that name an iteration: "step 3", "layer:train_step_3", "iteration#12", "iter-4".
_USER_STEP = re.compile(r"(?i)(?:^|[^a-z])(?:step|iter|iteration)[\s#:_-]*(\d+)\s*$")
# Kernels that only convert a tensor between NCHW and NHWC (cuDNN's, PyTorch's): the price of a convolution in
# a layout its kernels do not take.
_LAYOUT = re.compile(r"(?i)nchwtonhwc|nhwctonchw|nchw2nhwc|nhwc2nchw")
# Ops whose device-to-host copy makes the host wait for the GPU (Tensor.item(), and what .cpu() of a scalar runs).
SYNC_OPS = frozenset({"item", "_local_scalar_dense"})


class WorkerData:
    """Everything aggregated for one worker (a process of one input)."""

    def __init__(self, name: str, chunk: bool = False) -> None:
        """``chunk``: it aggregates a part of the input (aggregate_jobs), to be merged after the parts before."""
        self.name = name
        self.pid = None  # the process id its records carry (None: the activities without a process)
        # The groups (pyprof.prof.table.groups.Group), by op, op and input shapes, kernel (kernels only, by full
        # name: kernels that share a short name are different code), call site, and layer path (the self time
        # of the exact path; the layers view adds up the tree).
        self.ops: dict[str, Group] = {}
        self.shapes: dict[tuple[str, str], Group] = {}
        self.kernel_groups: dict[str, Group] = {}
        self.kernel_names: dict = {}  # full name -> short name
        self.lines: dict[str, Group] = {}
        self.layers: dict[tuple, Group] = {}
        # (op key, kernel, params, line, the formula's tc_dims, dtype): GEMM/conv/attention kernels that could
        # have run on Tensor Cores and did not; Group.ideal_ns there is the time at the Tensor Core roofline
        self.tc_miss: dict[tuple, Group] = {}
        self.copies: dict[tuple[str, str], Group] = {}  # (copy kind, line): copies between host and device
        # (op, line): device-to-host copies that make the host wait (SYNC_OPS, or a synchronous cudaMemcpy);
        # not in ``copies``
        self.syncs: dict[tuple[str, str], Group] = {}
        self.sync_at: list[int] = []  # their indices in the timeline arrays
        # (line, op key): every activity, and each key's index (``site`` of the timeline)
        self.line_ops: dict[tuple[str, str], Group] = {}
        self.site_keys: list[tuple[str, str]] = []
        self.site_ids: dict[tuple[str, str], int] = {}
        # op key: the optimizer's kernels (is_optimizer); their Group.bytes are the modelled bytes
        self.optimizer: dict[str, Group] = {}
        # (ProfilerStep, user step) -> bytes of the largest tensor list an optimizer op call took in that step:
        # the parameters (or one of their state tensors)
        self.opt_list_bytes: dict[tuple[int, int], int] = {}
        self.opt_ranges: set = set()  # the Optimizer.step#CLASS.step ranges seen
        # (short kernel name, op key, line, a matrix kernel: GEMM, convolution, attention): kernels whose roofline is
        # set by their bytes (memory-bound)
        self.mem_bound: dict[tuple, Group] = {}
        # (op key, short kernel name, line): NCHW <-> NHWC conversion kernels (_LAYOUT)
        self.layout: dict[tuple, Group] = {}
        self.layout_names: set = set()  # full kernel names matching _LAYOUT
        # (layout "nchw" / "nhwc" / "?", dtype): convolution kernels
        self.convs: dict[tuple, Group] = {}
        self.totals = {"records": 0, "kernels": 0, "kernel_ns": 0, "memcpy_ns": 0, "memset_ns": 0, "gpu_ns": 0,
                       "tiny_kernels": 0, "tiny_ns": 0, "comm_ns": 0, "flops": 0, "ideal_ns": 0.0, "tc_ns": 0,
                       "graph_ns": 0}  # graph_ns: kernel time replayed from CUDA graphs (launched by a graph launch)
        self.gpus: set = set()
        self.untimed = 0  # activities without start/end times (left out of the steps)
        # The timeline, one entry per activity, in input order.
        self.start_ns = array("q")
        self.end_ns = array("q")
        self.launch_ns = array("q")  # api_start_ns, or start_ns without a launch row
        self.kind = array("b")
        self.thread = array("i")  # index into self.threads
        self.profiler_step = array("i")  # N of ProfilerStep#N, or NO_STEP
        # N of a user step/iteration range, or the push time of the --step-marker range it ran under; or NO_STEP
        self.user_step = array("q")
        self.step_marker: str | None = None  # --step-marker's name, once one of this worker's records had its range
        self.marker_untimed = 0  # activities under a --step-marker range whose push time the records lack
        self.site = array("i")  # index into site_keys: the activity's (line, op key)
        self.sm_busy_ns = array("d")  # duration x min(1, blocks / SMs); -1 unknown
        self.occ_x_ns = array("d")  # estimated occupancy x duration; -1 unknown
        self.threads: dict = {}  # tid -> index
        self.limits: dict = {}  # (gpu, device) -> occupancy.Limits
        # group key (op key; (op key, shapes key)) -> the call_ids of the op calls with a kernel in that group: a
        # group's calls are its distinct call_ids, however the calls' kernels interleave
        self.call_ids: dict = {}
        # a part of the input (``chunk``): (call_id, op key, shapes key, optimizer, line, host ns, new in the op
        # group, new in the shapes group) of each call it counted; merged after the part before it, a call that
        # part counted too (one running across the seam) is taken off again
        self.counted: list | None = [] if chunk else None
        # records without call_id (parsed before parse wrote it): tid -> identity of the op call its last
        # kernel belonged to (_old_call), and how many calls were told so (a part of the input cannot tell
        # them across its seam: aggregate_jobs leaves such files to the one pass)
        self.last_call: dict = {}
        self.old_calls = 0
        # ProfilerStep number -> the most tokens an embedding lookup of that step read (its integer input's size):
        # a forward of a language model says with it whether it was a prefill or a decode (pyprof.prof.forwards)
        self.step_tokens: dict[int, int] = {}
        self.memory: list = []  # pyprof.prof.memory_timeline.MemoryRun of this process's memory lines, in file order
        self.host: list = []  # pyprof.prof.host_time.HostRun of this process's host lines, in file order
        self.window: list = []  # pyprof.prof.load.window.WindowRun of its window line (its input's profiled window)
        self.program: list = []  # pyprof.prof.load.program.ProgramRun: its own step times around the capture
        self.devices: set = set()  # CUDA device ids its activities ran on
        # Communication kernels (is_comm): their indices in the timeline arrays and their short names, in input
        # order (the ranks view matches the n-th collective of a name across ranks)
        self.comm_at: list[int] = []
        self.comm_names: list[str] = []
        self.dist: dict | None = None  # its input's rank, world size, backend (parse's header), where known


    def merge(self, other: "WorkerData") -> None:
        """Append ``other``, the aggregate of the activities right after this one's (the next part of the same
        process's records), as if one pass had seen both: groups added up, the timeline arrays joined (thread
        and site indices renumbered), and an op call that runs across the seam (the same call_id on both sides)
        counted once. Every field is handled here: tests/prof/test_aggregate_jobs.py compares every view of a split
        pass with one pass."""
        mine = self.call_ids
        for cid, okey, skey, optimizer, line, host, new_op, new_shape in other.counted or ():
            if new_op and cid in mine.get(okey, ()):  # counted before the seam: the other part counted it again
                for g in (other.ops[okey],) + ((other.optimizer[okey],) if optimizer else ()):
                    g.calls -= 1
                other.ops[okey].host_ns -= host  # and its host time
                other.lines[line].host_ns -= host
            if new_shape and cid in mine.get((okey, skey), ()):
                g = other.shapes[(okey, skey)]
                g.calls -= 1
                g.host_ns -= host
        for key, ids in other.call_ids.items():
            have = mine.get(key)
            if have is None:
                mine[key] = ids
            else:
                have |= ids
        self.last_call.update(other.last_call)
        self.old_calls += other.old_calls
        for attr in ("ops", "shapes", "kernel_groups", "lines", "layers", "tc_miss", "copies", "syncs", "line_ops",
                     "optimizer", "mem_bound", "layout", "convs"):
            mine = getattr(self, attr)
            for key, g in getattr(other, attr).items():
                cur = mine.get(key)
                if cur is None:
                    mine[key] = g
                else:
                    cur.merge(g)
        for full, short in other.kernel_names.items():
            self.kernel_names.setdefault(full, short)
        for key, nbytes in other.opt_list_bytes.items():
            if nbytes > self.opt_list_bytes.get(key, 0):
                self.opt_list_bytes[key] = nbytes
        self.opt_ranges |= other.opt_ranges
        for key, n in other.step_tokens.items():
            if n > self.step_tokens.get(key, 0):
                self.step_tokens[key] = n
        self.memory += other.memory
        self.host += other.host
        self.window += other.window
        self.program += other.program
        self.layout_names |= other.layout_names
        self.gpus |= other.gpus
        self.devices |= other.devices
        if self.dist is None:
            self.dist = other.dist
        for key, lim in other.limits.items():
            self.limits.setdefault(key, lim)
        for k, v in other.totals.items():
            self.totals[k] += v
        self.untimed += other.untimed
        self.step_marker = self.step_marker or other.step_marker
        self.marker_untimed += other.marker_untimed
        offset = len(self.start_ns)
        self.sync_at += [i + offset for i in other.sync_at]
        self.comm_at += [i + offset for i in other.comm_at]
        self.comm_names += other.comm_names
        thread_map = np.zeros(len(other.threads), np.int32)
        for tid, i in other.threads.items():
            j = self.threads.get(tid)
            if j is None:
                j = self.threads[tid] = len(self.threads)
            thread_map[i] = j
        site_map = np.zeros(len(other.site_keys), np.int32)
        for i, key in enumerate(other.site_keys):
            j = self.site_ids.get(key)
            if j is None:
                j = self.site_ids[key] = len(self.site_keys)
                self.site_keys.append(key)
            site_map[i] = j
        for attr in ("start_ns", "end_ns", "launch_ns", "kind", "profiler_step", "user_step", "sm_busy_ns",
                     "occ_x_ns"):
            getattr(self, attr).extend(getattr(other, attr))
        # renumbered in C: a million activities a merge
        self.thread.frombytes(thread_map[np.frombuffer(other.thread, np.int32)].tobytes())
        self.site.frombytes(site_map[np.frombuffer(other.site, np.int32)].tobytes())

    @property
    def kernels(self) -> dict[str, Group]:
        """The kernel groups merged by short name (what the rules of the recommendations view read)."""
        out: dict = {}
        for full, g in self.kernel_groups.items():
            merge_into(out, self.kernel_names.get(full, full), g)
        return out


class Aggregate:
    """The result of the pass: workers by name, in first-seen order, plus the coverage of the modelling."""

    def __init__(self) -> None:
        self.workers: dict[str, WorkerData] = {}
        self.coverage = Coverage()
        self.inputs: list[str] = []
        self.peaks = Peaks()  # the peaks the pass used (--gpu, --peak): the views judge GPUs by the same ones
        # where the views may read source text (--source-root; by default the current folder): the profile's
        # paths alone never decide it (pyprof.prof.source_lines)
        self.source = SourceText()
        # input name -> the schema of its records (parse's header line; None: no header, records before schema
        # 3), for the inputs read from a file: what a view says of the side lines an input lacks
        self.schemas: dict[str, int | None] = {}
        # input name -> its join line (pyprof.prof.load.joined: times from a timing pass), for the inputs that have one
        self.joins: dict = {}

    def select(self, worker: str | None) -> list[WorkerData]:
        """The workers a view covers: all (None) or the one named. Raises UsageError for an unknown name."""
        return pick(self.workers, worker)


def pick(workers: dict, worker: str | None) -> list:
    """The values of ``workers`` (by name) that a view covers: all (None) or the one named. Raises UsageError
    for an unknown name."""
    if worker is None:
        return list(workers.values())
    w = workers.get(str(worker))
    if w is None:
        raise UsageError(f"--worker {worker!r}: no such worker (there are: {', '.join(workers) or 'none'})")
    return [w]


_step_cache = BoundedDict(100_000)  # range name -> (ProfilerStep number, user step number)


def _step_labels(ranges) -> tuple[int, int]:
    """(ProfilerStep number, user step number) of a range stack; NO_STEP where none."""
    ps = us = NO_STEP
    for name in ranges or ():
        hit = _step_cache.get(name)
        if hit is None:
            hit = (NO_STEP, NO_STEP)
            if name.startswith(_PROFILER_STEP) and name[len(_PROFILER_STEP):].isdigit():
                hit = (int(name[len(_PROFILER_STEP):]), NO_STEP)
            else:
                m = _USER_STEP.search(name)
                if m:
                    hit = (NO_STEP, int(m.group(1)))
            _step_cache.add(name, hit)
        if hit[0] != NO_STEP and ps == NO_STEP:
            ps = hit[0]
        elif hit[1] != NO_STEP and us == NO_STEP:
            us = hit[1]
    return ps, us


def aggregate(sources: Iterable[tuple[str, Iterable[dict]]], peaks: Peaks | None = None,
              observe: Callable[[WorkerData, dict, object, object], None] | None = None,
              marker: StepMarker | None = None) -> Aggregate:
    """Aggregate records from one or more inputs (``(input name, records)`` pairs: one per rank or file).

    ``observe(worker, record, model result, roofline)``, when given, also sees every activity of the pass (the
    report's per-activity table), so that a caller needing more than the groups reads and models nothing twice;
    the worker's ``name`` is final once aggregate returns. ``marker`` (``--step-marker``): steps are its ranges,
    whatever other step ranges the records hold (UsageError where no activity ran under one).

    A worker is a process id of one input; with several inputs it is named ``INPUT`` (or ``INPUT:PID`` when
    an input holds several processes). Returns the Aggregate. Raises InputError (via the Modeller's rows)
    for a record whose fields have unexpected types.
    """
    agg = Aggregate()
    peaks = agg.peaks = peaks or Peaks()
    sources = list(sources)
    keyed: dict = {}
    with no_cyclic_gc():  # records are trees: the collector's passes over the held ones are pure cost
        for si, (name, records) in enumerate(sources):
            agg.inputs.append(name)
            _one_input(agg, si, name, records, peaks, keyed, observe, marker)
    pids_per_input: dict = {}
    for (si, pid) in keyed:
        pids_per_input.setdefault(si, []).append(pid)
    for (si, pid), w in keyed.items():
        w.pid = pid
        w.name = worker_name(sources[si][0], pid, len(sources), len(pids_per_input[si]))
        agg.workers[w.name] = w
    if marker is not None:
        unmarked(agg, marker)
    return agg


def worker_name(input_name: str, pid, inputs: int, processes: int) -> str:
    """A worker's name: its process id alone (``unknown`` for activities without one) when the pass has one
    input; with several, the input's name, or ``INPUT:PID`` when the input holds ``processes`` > 1."""
    label = "unknown" if pid is None else str(pid)  # original PyProf dict lines carry no process id
    if inputs == 1:
        return label
    return input_name if processes == 1 else f"{input_name}:{label}"


def aggregate_files(paths: list[str], peaks: Peaks | None = None, marker: StepMarker | None = None) -> Aggregate:
    """Aggregate record files (parse's JSON Lines or PyProf dict lines; ``-`` is stdin), one input per path.
    Raises InputError naming the file and line of a malformed record."""
    import sys

    from pyprof.common import open_input
    from pyprof.prof.load.contract import Header
    from pyprof.prof.load.input_names import input_names
    from pyprof.prof.load.reader import read_records

    streams = []
    try:
        sources = []
        for p, name in zip(paths, input_names(paths)):
            s = open_input(p, "rb")
            streams.append(s)
            side: list = []
            header = Header()
            sources.append((name, _Numbered(read_records(s, "<stdin>" if p == "-" else p, side, header), side,
                                            header)))
        return aggregate(sources, peaks, marker=marker)
    finally:
        for s in streams:
            if s is not sys.stdin.buffer:
                s.close()


class _Numbered:
    """Marks an iterable of (line number, record) pairs, so that errors name the input's line; ``side`` is the
    list the reader fills with what the input's side lines hold (reader.read_records), and ``header`` the
    contract.Header it reads parse's header line into, once the pairs are read."""

    def __init__(self, pairs, side: list | None = None, header=None) -> None:
        self.pairs = pairs
        self.side = side
        self.header = header


def numbered_file(path: str, display: str) -> _Numbered:
    """One input of ``aggregate``: the records of the file at ``path`` (opened when first read), and its side
    lines."""
    from pyprof.prof.load.contract import Header
    from pyprof.prof.load.reader import read_records

    side: list = []
    header = Header()

    def pairs():
        with open(path, "rb") as f:
            yield from read_records(f, display, side, header)

    return _Numbered(pairs(), side, header)


def _one_input(agg: Aggregate, si: int, name: str, records, peaks: Peaks, keyed: dict, observe,
               marker: StepMarker | None) -> None:
    w = None
    w_key = None
    numbered = records.pairs if isinstance(records, _Numbered) else enumerate(records, 1)
    for _idx, d, m, r in rows(numbered, Modeller(share=True), peaks, True, agg.coverage, name):
        pid = d.get("pid")
        if (si, pid) != w_key:
            w_key = (si, pid)
            w = keyed.get(w_key)
            if w is None:
                w = keyed[w_key] = WorkerData(f"{name}:{pid}")
        _add_record(w, d, m, r, peaks, marker)
        if observe is not None:
            observe(w, d, m, r)
    for run in (records.side or []) if isinstance(records, _Numbered) else []:
        if getattr(run, "PER_INPUT", False):  # no process's: a worker made for it would be a fake one
            agg.joins[name] = run
            continue
        attach_side(keyed, (si, run.pid), run, lambda: WorkerData(f"{name}:{run.pid}"))
    header = records.header if isinstance(records, _Numbered) else None
    if header is not None:
        set_dist(keyed, si, header.dist)
        if header.schema is not None or w is not None:  # an empty input shows no schema
            agg.schemas[name] = header.schema


def set_dist(workers: dict, key: object, dist: dict | None) -> None:
    """Give the input's rank (parse's header ``dist``) to its process, the workers of ``key`` (``(key, pid)``
    keys, or pid keys with key None): a rank is one process, so an input of several processes (an nsys export
    of a whole job) names none of them by it."""
    mine = [(k, w) for k, w in workers.items() if key is None or k[0] == key]
    procs = [w for k, w in mine if (k if key is None else k[1]) is not None]
    if dist is not None and len(procs) == 1:
        procs[0].dist = dist


def attach_side(workers: dict, key, run, new) -> None:
    """Give what a side line holds to the worker of its process, ``workers[key]`` (made by ``new()`` when the
    process has no GPU activity: a CPU-only run's allocations), in its list named by the line's kind."""
    w = workers.get(key)
    if w is None:
        w = workers[key] = new()
    getattr(w, run.KIND).append(run)


def _first_of_call(ids: dict, group, cid) -> bool:
    """Whether call ``cid`` is new to ``group`` (an op, or an op with its shapes): each call counts once per group."""
    seen = ids.get(group)
    if seen is None:
        seen = ids[group] = set()
    if cid in seen:
        return False
    seen.add(cid)
    return True


def _new_call(w: WorkerData, d: dict, okey: str, skey: str, is_kernel: bool, optimizer: bool) -> tuple[int, int]:
    """(1 when this activity is the first of its op call in its op's group, the same for its op and shapes
    group), else 0s. A kernel's call is its ``call_id`` (parse's): a group's calls are the distinct call_ids of
    its kernels. Every copy and memset is a call of its own, and so is a kernel with a null call_id (no op
    range encloses it). Records without call_id: _old_call."""
    if not is_kernel:
        return 1, 1
    cid = d.get("call_id")
    if cid is None and okey.startswith(USER_RANGE):
        push = range_push_ns(d)  # a user range's instance is its call: its kernels, wherever they interleave
        cid = None if push is None else ("range", push)
    if cid is None:
        new = _old_call(w, d, okey)
        return new, new
    new_op = _first_of_call(w.call_ids, okey, cid)
    skey = (okey, skey)
    new_shape = _first_of_call(w.call_ids, skey, cid)
    if (new_op or new_shape) and w.counted is not None:
        w.counted.append((cid, okey, skey[1], optimizer, callsite_key(d), d.get("host_ns") or 0, new_op, new_shape))
    return new_op, new_shape


def _old_call(w: WorkerData, d: dict, okey: str) -> int:
    """1 when a kernel of a record without call_id starts a new op call, else 0. Such a call is identified by the
    op marker's call id (forward, pyprof markers), else by the autograd sequence number (a backward node, or a
    forward op under emit_nvtx / Kineto), on its thread; kernels of one call run one after another on that
    thread. Without either, a kernel numbered 0 in its call starts one (so does every kernel no op encloses,
    whose call_id is null)."""
    direction = d.get("dir")
    cid = None
    mk = d.get("marker")
    if direction != "bprop" and mk and type(mk[0]) is dict:
        cid = mk[0].get("call")
    if cid is None:
        seq = d.get("seqId")
        cid = seq[0] if seq else None
    if cid is None:
        sub = d.get("subSeqId")
        return 1 if sub == 0 or sub is None else 0
    ident = (okey, direction, cid)
    tid = d.get("tid")
    w.old_calls += 1
    if w.last_call.get(tid) == ident:
        return 0
    w.last_call[tid] = ident
    return 1


def _token_count(args) -> int:
    """The elements of the first integer tensor among an embedding call's arguments: the tokens it looked up (an
    eager call's ``[batch, sequence]`` input, or a compiled kernel's flattened one); 0 where there is none."""
    for a in args if type(args) is list else ():
        if type(a) is dict and a.get("type") == "tensor" and a.get("dtype") in ("int64", "int32"):
            shape = a.get("shape")
            if type(shape) is list and all(type(x) is int and x >= 0 for x in shape):
                n = 1
                for x in shape:
                    n *= x
                return n
    return 0


def _list_bytes(args) -> int:
    """Bytes of the largest tensor list among an op's arguments (0 when none, or a dtype is unknown)."""
    best = 0
    for a in args or ():
        if type(a) is dict and a.get("type") == "tensorlist" and type(a.get("items")) is list:
            n = 0
            for t in a["items"]:
                info = dtype_info(t.get("dtype")) if type(t) is dict else None
                if info is None or type(t.get("shape")) is not list:
                    break
                n += prod(t["shape"]) * info[1]
            else:
                best = max(best, n)
    return best


def _add_record(w: WorkerData, d: dict, m, r, peaks: Peaks, marker: StepMarker | None = None) -> None:
    kind = _KIND.get(d.get("kind") or "kernel", KERNEL)
    s = sample(d, m, r)
    dur, flops, ideal, tc_ns, tiny = s.ns, s.flops, s.ideal_ns, s.tc_ns, s.tiny
    t = w.totals
    t["records"] += 1
    t["gpu_ns"] += dur
    t["flops"] += flops
    t["ideal_ns"] += ideal
    t["tc_ns"] += tc_ns
    line = callsite_key(d)
    is_kernel = kind == KERNEL
    okey = op_key(d)
    skey = shapes_key(d)
    new_call, new_shape = _new_call(w, d, okey, skey, is_kernel, s.optimizer)
    g_op = add(w.ops, okey, s, new_call)
    g_shape = add(w.shapes, (okey, skey), s, new_shape)
    g_line = add(w.lines, line, s)
    # An op call's host time, counted with its first kernel in the group (a copy or memset is a call of its own
    # kind, whose range is its op's: that op's kernels count it)
    host = d.get("host_ns") if is_kernel else None
    if host:
        if new_call:
            g_op.host_ns += host
            g_line.host_ns += host
        if new_shape:
            g_shape.host_ns += host
    site = (line, okey)
    add(w.line_ops, site, s)
    add(w.layers, tuple(layer_path(d)), s)
    # A device's limits do not change within a worker: read its props once.
    lkey = (d.get("gpu"), d.get("device"))
    lim = w.limits.get(lkey)
    if lim is None:
        lim = limits(d.get("gpu_props"))
        if lim is not None:
            w.limits[lkey] = lim
    sm_ns = occ_x = -1.0
    if is_kernel:
        t["kernels"] += 1
        t["kernel_ns"] += dur
        name = d.get("kShortName") or "na"
        full = kernel_key(d)
        if tiny:
            t["tiny_kernels"] += 1
            t["tiny_ns"] += dur
        if d.get("api") in GRAPH_LAUNCH_APIS:
            t["graph_ns"] += dur
        if s.comm:  # groups.is_comm, as sample() read it
            t["comm_ns"] += dur
            if d.get("start_ns") is not None:
                w.comm_at.append(len(w.start_ns))
                w.comm_names.append(name)
        frac = sm_fraction(d.get("grid"), lim)
        if frac is not None:
            sm_ns = frac * dur
        occ = kernel_occupancy(d, lim)
        if occ is not None:
            occ_x = occ * dur
        g = w.kernel_groups.get(full)
        if g is None:
            w.kernel_names[full] = name
        g = add(w.kernel_groups, full, s, 1)
        g.add_extremes(dur)
        if occ_x >= 0:
            g.add_occupancy(occ_x, dur)
        if g.count == 1 and _LAYOUT.search(full):
            w.layout_names.add(full)
        if full in w.layout_names:
            add(w.layout, (okey, name, line), s)
        gp = None
        if s.roof_ns:
            gp = peaks.for_gpu(d.get("gpu"))
            # memory-bound: the bytes at the peak bandwidth take at least the roofline's ideal time
            if gp is not None and gp.bandwidth_gbps and m.bytes and m.bytes / gp.bandwidth_gbps >= 0.999 * ideal:
                add(w.mem_bound, (name, okey, line, m.family in TC_FAMILIES), s)
        if m.tc is False and m.family in TC_FAMILIES:
            if gp is None:
                gp = peaks.for_gpu(d.get("gpu"))
            tc_pct = roofline(m.flops, m.bytes, dur, gp, m.dtype, True).roofline_pct
            add(w.tc_miss, (okey, name, m.params, line, m.tc_dims, m.dtype),
                s._replace(ideal_ns=on_grid(tc_pct * dur / 100.0) if tc_pct is not None else 0.0))
        if m.family == Family.CONV:
            low = full.lower()
            add(w.convs, ("nhwc" if "nhwc" in low else "nchw" if "nchw" in low else "?", m.dtype), s)
        if s.optimizer:
            add(w.optimizer, okey, s, new_call).bytes += m.bytes or 0
            if new_call:
                for rname in d.get("ranges") or ():
                    if rname.startswith(OPTIMIZER_RANGE):
                        w.opt_ranges.add(rname)
                nbytes = _list_bytes(d.get("args"))
                if nbytes:
                    key = _step_labels(d.get("ranges"))
                    if nbytes > w.opt_list_bytes.get(key, 0):
                        w.opt_list_bytes[key] = nbytes
    elif kind == MEMCPY:
        t["memcpy_ns"] += dur
        ck = d.get("copy_kind") or "?"
        op = as_list(d.get("op"))  # a writer may give one string
        if ck in ("DtoH", "AtoH") and ((op and (op[0] in SYNC_OPS or op[-1] in SYNC_OPS))
                                       or d.get("api") == "cudaMemcpy"):
            add(w.syncs, (op[0] if op else "-", line), s).bytes += d.get("bytes") or 0
            if d.get("start_ns") is not None:
                w.sync_at.append(len(w.start_ns))
        elif ck in ("HtoD", "DtoH", "HtoA", "AtoH"):
            add(w.copies, (ck, line), s).bytes += d.get("bytes") or 0
    else:
        t["memset_ns"] += dur
    if d.get("gpu"):
        w.gpus.add(d["gpu"])
    if d.get("device") is not None:
        w.devices.add(d["device"])
    start = d.get("start_ns")
    if start is None:  # original PyProf dict lines have durations only: no place on the timeline
        w.untimed += 1
        return
    api = d.get("api_start_ns")
    tid = d.get("tid")
    ti = w.threads.get(tid)
    if ti is None:
        ti = w.threads[tid] = len(w.threads)
    if marker is None:
        ps, us = _step_labels(d.get("ranges"))
    else:
        ps, (us, untimed) = NO_STEP, marker.label(d)
        if us != NO_STEP:
            w.step_marker = marker.pattern
        w.marker_untimed += untimed
    if ps != NO_STEP:
        op = d.get("op")
        if op and type(op) is list and type(op[0]) is str and "embedding" in op[0]:
            n = _token_count(d.get("args"))
            if n > w.step_tokens.get(ps, 0):
                w.step_tokens[ps] = n
    w.start_ns.append(start)
    w.end_ns.append(d.get("end_ns") or start + dur)
    w.launch_ns.append(api if api is not None else start)
    w.kind.append(kind)
    w.thread.append(ti)
    w.profiler_step.append(ps)
    w.user_step.append(us)
    sid = w.site_ids.get(site)
    if sid is None:
        sid = w.site_ids[site] = len(w.site_keys)
        w.site_keys.append(site)
    w.site.append(sid)
    w.sm_busy_ns.append(sm_ns)
    w.occ_x_ns.append(occ_x)
