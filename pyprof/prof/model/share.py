"""Sharing an op call's FLOPs and bytes among the kernels that do its work, in proportion to their durations.

Every sharing kernel then runs at the call's own rate (its share over its duration is the call's total over
the call's time), except that a kernel that only orders, moves or sets data (a sort, a copy, a fill) takes bytes
but no FLOPs where the call has a kernel that computes. The shares are integers that add up to the call's totals
exactly, so per-op and per-step sums do not move. The bookkeeping of which kernels belong to which call is the Modeller's
(model.py); this module only divides.
"""
from __future__ import annotations

from typing import NamedTuple

from pyprof.prof.model.kernels import does_arithmetic

#: A call's kernels share its numbers only within this many input lines of its first record; a later kernel
#: of the call shares nothing (and one more than this after the call's previous kernel starts a new call).
#: This bounds what the pipeline holds back (report.RowStream) and what a --jobs worker reads before and
#: after its chunk (parallel.py).
WINDOW = 1024


class Fix(NamedTuple):
    """A kernel whose final result is not the one the Modeller gave it when it came."""

    idx: int  # the record's index in the input
    record: dict
    given: object  # model.Result given then
    final: object  # model.Result: its share


def apportion(total: int | None, weights: list) -> list:
    """``total`` split in proportion to ``weights`` (equal parts when they are all 0) as integers that add
    up to ``total`` exactly: each part is the floor of its exact share, and what is left goes one unit at a
    time to the largest remainders (the earlier part on a tie). None for every part when ``total`` is None."""
    n = len(weights)
    if total is None:
        return [None] * n
    weights = [int(w) if w and w > 0 else 0 for w in weights]
    whole = sum(weights)
    if whole == 0:
        weights, whole = [1] * n, n
    parts = [total * w // whole for w in weights]
    left = total - sum(parts)
    if left:
        remainders = [total * w % whole for w in weights]
        # a stable sort, largest first: on a tie the earlier part comes first
        for i in sorted(range(n), key=remainders.__getitem__, reverse=True)[:left]:
            parts[i] += 1
    return parts


def shares(entries: list) -> list[Fix]:
    """The fixes for one closed call: ``entries`` are its sharing kernels as (idx, record, result given,
    the call's result, tc); kernels with the same call's result (one gradient of a backward GEMM, or the
    whole call) share it. A group of one keeps what it was given."""
    whole = entries[0][3]
    if all(e[3] is whole for e in entries):  # one group: the common case
        groups: list = [entries]
    else:
        by_result: dict = {}
        for e in entries:
            by_result.setdefault(id(e[3]), []).append(e)
        groups = list(by_result.values())
    if len(groups) > 1 and _roles_mismatched(groups):
        groups = [[(i, d, given, merged, tc) for i, d, given, _w, tc in entries]
                  for merged in [_combined([g[0][3] for g in groups])]]
    fixes = []
    for group in groups:
        if len(group) < 2:
            continue
        whole = group[0][3]
        if whole.flops is None and whole.bytes is None:  # the call is not modelled: none of its kernels is
            finals = [whole] * len(group)
        else:
            durations = [e[1].get("kDuration") or 0 for e in group]
            flops, nbytes = apportion(whole.flops, _arithmetic(group, durations)), apportion(whole.bytes, durations)
            make, w = type(whole), whole
            finals = [_new(make, (f, b, w.params, e[4], w.reason, w.family, w.dtype, w.role, w.tc_dims))
                      for e, f, b in zip(group, flops, nbytes)]
        for (idx, d, given, _whole, _tc), final in zip(group, finals):
            if final is not given:
                fixes.append(_new(Fix, (idx, d, given, final)))
    return fixes


def _arithmetic(group: list, durations: list) -> list:
    """The weights a call's FLOPs are shared by: the durations of the kernels that may do its arithmetic
    (kernels.does_arithmetic), so that a per-kernel row never shows a radix sort doing floating-point work; every
    kernel's where none or all of them do."""
    doing = [does_arithmetic(e[1].get("kShortName") or e[1].get("kLongName") or "") for e in group]
    if all(doing) or not any(doing):
        return durations
    weights = [w if do else 0 for w, do in zip(durations, doing)]
    return weights if any(weights) else [1 if do else 0 for do in doing]


# A third of the rows of real records are made again with their share: tuple.__new__ makes those named tuples
# without their Python-level __new__ (the fields are given in order, all of them).
_new = tuple.__new__


#: Rates of a backward GEMM/convolution call's gradients (FLOPs per ns of their kernels) further apart than this
#: say the kernels were given gradients they did not compute (dgrad and wgrad of one op have the same FLOPs, so
#: their kernels run within a few times of each other's rate).
ROLE_RATE_SPREAD = 8


def _roles_mismatched(groups: list) -> bool:
    """True when a call's gradient groups ran at rates no honest split explains: a group of a one-microsecond
    kernel holding half the call's FLOPs (an offset-table kernel taken, by its place, for the dgrad)."""
    rates = []
    for g in groups:
        whole = g[0][3]
        ns = sum(e[1].get("kDuration") or 0 for e in g)
        if whole.role not in ("dgrad", "wgrad") or not whole.flops or ns <= 0:
            return False
        rates.append(whole.flops / ns)
    return max(rates) > ROLE_RATE_SPREAD * min(rates)


def _combined(wholes: list):
    """One result for a call's gradients together (when which kernel computed which cannot be told)."""
    first = wholes[0]
    flops = sum(w.flops for w in wholes)
    nbytes = None if any(w.bytes is None for w in wholes) else sum(w.bytes for w in wholes)
    params = first.params.rsplit(",", 1)[0] + ",bprop" if first.params else first.params
    return first._replace(flops=flops, bytes=nbytes, params=params, role="bprop")
