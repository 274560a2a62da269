"""CUDA graphs captured inside a PyTorch-profiler trace, tied to their replays by launch order.

A trace's calls made during a capture name no graph node: a replayed kernel is joined to its capture only
through the correlation of its ``cudaGraphLaunch``. The capture, when it happened inside the trace, is there:
between the process's ``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` each kernel launch, copy and memset
is recorded as a call with its ops around it, and no GPU activity (nothing ran). A graph captured on one stream
replays its nodes in the order they were captured, so the i-th activity of a replay is the i-th call of its
capture. Each such
call becomes the graph node of the nsys reader's words (key ``("node", correlation)``) and each replayed activity
points to it (``Activity.attribution_key``): parse then gives the replay its node's op, shapes, line and layer
under the replay's own ranges, as it does for Nsight Systems' node ids.

Tied only where that order is certain: a replay on one stream, with exactly as many activities as one capture of
its process (ended before the launch) has calls, and no other such capture of that count. Kineto since 2026 also
names each replayed activity's graph and node ("graph id", "graph node id"; none for the capture's calls, so the
first tie is still by order): the nodes of one tied replay then tie every other replay of that graph, activity by
activity, whatever its streams or however much of it the trace kept. Every other activity keeps its launching op,
and its kernels are counted by why (NO_CAPTURE, AMBIGUOUS, COUNT, STREAMS).
"""
from __future__ import annotations

from typing import NamedTuple

from pyprof.parse.readers.activities import GRAPH_LAUNCH_APIS, Activity, Launch

#: Why a replay's activities keep the op that launched the graph (kernels counted per why, in the parse summary).
NO_CAPTURE = ("their capture is not in the trace (made before it began: start the profiler before the capture; "
              "on NVIDIA GPUs pyprof.init() under Nsight Systems keeps a capture made at any time)")
AMBIGUOUS = "several captures in the trace have their length, and order cannot tell which"
COUNT = "no capture in the trace has their length"
STREAMS = "they ran on several streams, so their order need not be their capture's"


class Capture(NamedTuple):
    """One stream capture of a process: its end, and the calls made during it that did not run (its nodes)."""

    pid: object
    end_ns: int
    calls: tuple  # indices into the launches, in capture order


def _captures(launches: list[Launch], ran: set) -> list[Capture]:
    """Each process's captures in ``launches`` (in start order). Calls from any thread of the process count while a
    capture is open (the autograd engine's thread launches the backward of a captured step); calls that ran (an
    activity names them) were not captured. Overlapping captures of one process are dropped: their calls cannot
    be told apart."""
    out: list[Capture] = []
    open_: dict = {}  # pid -> [calls] while a capture is open; None once two overlap
    for i, c in enumerate(launches):
        pid = _process(c)
        api = c.api
        if "BeginCapture" in api:
            open_[pid] = None if pid in open_ else []
        elif "EndCapture" in api:
            calls = open_.pop(pid, None)
            if calls is not None:
                out.append(Capture(pid, c.end_ns, tuple(calls)))
        elif pid in open_ and open_[pid] is not None and c.key not in ran and _is_work(api):
            open_[pid].append(i)
    return out


def _process(call: Launch) -> object:
    # the process as the reader names it in the thread (Kineto: (pid, tid)), which Launch.pid leaves out when odd
    return call.thread[0] if type(call.thread) is tuple else call.pid


def _is_work(api: str) -> bool:
    # kernel launches (cudaLaunchKernel, cuLaunchKernelEx, cudaLaunchCooperativeKernel, ...), copies and memsets;
    # not a graph's own launch or upload
    return ("Launch" in api and "Graph" not in api) or "Memcpy" in api or "Memset" in api


def captured_calls(launches: list[Launch], acts: list[Activity]) -> int:
    """How many kernel launches, copies and memsets were made while a capture of their process was open, and so ran
    nothing: their work runs when the graph is replayed."""
    return sum(len(c.calls) for c in _captures(launches, {a.launch_key for a in acts}))


def tie_replays(launches: list[Launch], acts: list[Activity]) -> tuple[list, list, dict]:
    """``launches`` and ``acts`` (each in start order) with each captured call keyed as a graph node and each
    activity of a tied replay pointing to its node; and the count of kernels left untied, by why. The lists are
    returned as they came where no replay is tied."""
    graph_calls = {c.key: c for c in launches if c.api.startswith(GRAPH_LAUNCH_APIS)}
    if not graph_calls:
        return launches, acts, {}
    ran = {a.launch_key for a in acts}
    by_launch: dict = {}
    for j, a in enumerate(acts):
        if a.launch_key in graph_calls:
            by_launch.setdefault(a.launch_key, []).append(j)
    captures = _captures(launches, ran)
    untied: dict = {}
    tied: dict = {}  # activity index -> the index of the captured call it replays
    left: list = []  # (why, members) of each replay order could not tie
    for key, members in by_launch.items():
        call = graph_calls[key]
        pid = _process(call)
        before = [c for c in captures if c.pid == pid and c.end_ns <= call.start_ns]
        fits = [c for c in before if len(c.calls) == len(members)]
        why = NO_CAPTURE if not before else COUNT if not fits else AMBIGUOUS if len(fits) > 1 else \
            STREAMS if len({acts[j].stream for j in members}) > 1 else None
        if why is None:
            tied.update(zip(members, fits[0].calls))  # both in start order: the capture's order is the replay's
        else:
            left.append((why, members))
    # Where the trace names each replayed activity's graph node, a node tied in one replay is that node in every
    # replay of its graph: one whose streams overlapped, or one cut short by the trace's start (its launch before
    # the trace, so in no replay above).
    known = {acts[j].graph_node: i for j, i in tied.items() if acts[j].graph_node is not None}
    if known:
        for j, a in enumerate(acts):
            if a.graph_node in known and j not in tied:
                tied[j] = known[a.graph_node]
    for why, members in left:
        n = sum(1 for j in members if j not in tied and acts[j].kind == "kernel")
        if n:
            untied[why] = untied.get(why, 0) + n
    if not tied:
        return launches, acts, untied
    nodes = set(tied.values())
    acts = [a._replace(attribution_key=("node", launches[tied[j]].key)) if j in tied else a
            for j, a in enumerate(acts)]
    launches = [c._replace(key=("node", c.key)) if i in nodes else c for i, c in enumerate(launches)]
    return launches, acts, untied
