"""From a record to its numbers: which formula, in which role, for which kernels of the op call.

An op call often launches several kernels. Its FLOPs and bytes are shared among the kernels that do its work,
in proportion to their durations, so that every one of them runs at the call's own rate and a group's totals
are the calls' totals (docs/formulas.md, "Which kernels carry the numbers"). Recognised helper kernels of
GEMM, convolution and attention calls (layout transposes, split-K reductions, casts: kernels.py) carry none.
In a backward GEMM/convolution call the kernels share per gradient: a name that says ``dgrad``/``wgrad``
decides, otherwise the order does (autograd computes the input's gradient before the weight's), and a further
kernel continues the gradient of the one before it (a split-K pass).

A call is the run of kernels on one thread with the same direction, op, sequence ids, call site, arguments and
parse call (``call_id``: a kernel of another one starts a new call; parse numbers the calls of a whole backward
node, so the arguments tell its aten ops apart). In records without ``call_id`` (older files), a kernel with
``subSeqId`` 0 starts a new one, and so does one more than ``WINDOW`` input lines after the call's previous
kernel. The backward of a Python-level op often runs as several autograd nodes (cross_entropy:
NllLossBackward0 then LogSoftmaxBackward0); when pyprof markers give their aten ops no arguments, the node
whose op is of the forward op's kind carries the forward op's backward numbers, and the kernels of the
other nodes with the same forward link that follow it join its call.

``Modeller.model(d)`` answers record by record: the call's whole numbers on its first main kernel and
``counted on sub N`` on the others, as far as the records before it tell. The pipeline (report.rows,
report.RowStream) makes the Modeller with ``share=True`` and passes each record's line and index: then
``settle`` gives, once a call is closed, each kernel whose share differs from that first answer.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyprof.common import BoundedDict
from pyprof.prof.model import registry
from pyprof.prof.model.args import Args
from pyprof.prof.model.kernels import autocast, fill_dtypes, is_helper, named_role
from pyprof.prof.load.reader import ArgsDecoder, Raw
from pyprof.prof.model.registry import GRAD_FAMILIES, TC_FAMILIES, Estimate, Formula, NotModelled
from pyprof.prof.model.lookup import candidates, node_op
from pyprof.prof.model.results import Result, Static, as_list, copy_result, first_dtype, no_arguments
from pyprof.prof.model.share import WINDOW, Fix, shares
from pyprof.prof.model.tensorcores import tc_state

from orjson import dumps as json_key  # obj -> bytes, bound directly: called once per row; keys join raw JSON bytes

__all__ = ["Modeller", "Result", "candidates", "is_helper", "WINDOW"]


def _fwd_key(fwd: dict) -> bytes:
    """The part of the model's cache key that a forward link decides (its arguments may be raw JSON)."""
    a = fwd.get("args")
    return json_key((fwd.get("mod"), fwd.get("op"))) + (bytes(a) if type(a) is Raw else json_key(a))


def _gradient_present(args: list, role: str) -> str:
    """The role a backward GEMM/conv kernel can really have, given which gradients autograd computes.

    The first two tensors are the data input and the weight (for two activations, the left and the right
    operand): dgrad is the first's gradient, wgrad the second's. pyprof markers say ``grad`` (requires_grad)
    per tensor; when only one of the two gradients exists, the call's one main kernel computes that one,
    whatever its place in the call (the first layer of a network runs a weight gradient only). Markers
    without the flag (Kineto, emit_nvtx, older captures) leave the role as it is."""
    if role != "dgrad" and role != "wgrad":
        return role
    tensors = [e for e in args if type(e) is dict and "shape" in e][:2]
    if len(tensors) < 2:
        return role
    need_data, need_weight = tensors[0].get("grad", True), tensors[1].get("grad", True)
    if role == "dgrad" and need_data is False and need_weight is not False:
        return "wgrad"
    if role == "wgrad" and need_weight is False and need_data is not False:
        return "dgrad"
    return role


@dataclass(slots=True)
class OpCall:
    """The op call in progress on a thread: made once per op call, on the hot path (the fields that change as
    its kernels come have defaults, so that making one costs as little as it can)."""

    key: tuple  # (direction, op, first sequence id, call site, argument bytes)
    call_id: int | None  # parse's number of the op call (record call_id), None in records without it
    start_line: int  # input line of its first record
    last_line: int  # input line of its latest record
    fwd_key: bytes | None  # a backward op's borrowed forward link: kernels of the same forward op's other nodes join
    blind: bool  # a worker's replay started after a record of the thread that may belong to it (reset_calls)
    mains: int = 0  # kernels seen that are not helpers
    first_sub: int | None = None  # subSeqId of its first main kernel
    # backward GEMM/conv: (roles given, {gradient's numbers: (its result, subSeqId of its first kernel)})
    roles: tuple | None = None
    # share mode: its first main kernel (idx, record, result given, call's result, tc), until settled
    first: tuple | None = None
    more: list | None = None  # share mode: its further sharing kernels, as ``first`` (None while there is one)
    role: str | None = None  # backward GEMM/conv: the gradient of its latest main kernel


class Modeller:
    """Models records one at a time; stateful across records only for the op calls in progress.

    With ``share=True`` (the pipeline), ``model`` is given each record's input line and index, and the kernels
    of a call are remembered until ``settle`` gives their shares; see the module's docstring."""

    # Every record key ``model`` reads (lean decoding reads only these and the output's columns; a test
    # checks the rows equal those of the full decode on real captures). kDuration: the shares and the roofline.
    RECORD_KEYS = ("kind", "bytes", "copy_kind", "op", "mod", "dir", "fwd", "args", "outputs", "kLongName",
                   "kShortName", "subSeqId", "call_id", "seqId", "callsite", "tid", "kDuration")

    def __init__(self, share: bool = False) -> None:
        self._resolved: dict[tuple[str, str], Formula | None] = {}
        self._estimates = BoundedDict(200_000)  # (formula, role, argument bytes) -> Estimate
        self._calls: dict = {}  # tid -> OpCall in progress
        self._static = BoundedDict(100_000)  # (kernel, mod, op, dir, args, fwd) -> Static
        self._copies = BoundedDict(10_000)  # (kind, bytes, copy kind) -> Result
        self._args_value = ArgsDecoder()  # raw arguments -> their value, on a miss of ``_static``
        self._share = share
        self._closed: list = []  # the sharing kernels of each call closed since the last settle
        self.blind_until = self.watch_from = -1
        self.uncertain = False

    def reset_calls(self, blind_until: int = -1, watch_from: int = -1) -> None:
        """Forget the op calls in progress (a --jobs worker starting on a new chunk).

        The worker replays some lines before its chunk; a record before line ``blind_until`` that is not
        numbered 0 and finds no call on its thread may continue a call that started before them. When a
        record from line ``watch_from`` on (the chunk's) is such a record, or continues such a call,
        ``uncertain`` is set: the worker then replays more lines (parallel.py)."""
        self._calls.clear()
        self._closed.clear()
        self.blind_until, self.watch_from = blind_until, watch_from
        self.uncertain = False

    def resolve(self, mod: str, op: str) -> Formula | None:
        """The formula for a marker's module/op, or None (cached)."""
        k = (mod, op)
        try:
            return self._resolved[k]
        except KeyError:
            pass
        f = None
        for c in candidates(mod, op):
            f = registry.get(c)
            if f is not None:
                break
        self._resolved[k] = f
        return f

    def estimate(self, formula: Formula, args: list, role: str) -> Estimate:
        """The formula's estimate for these arguments and role, cached; never raises for bad arguments."""
        role = _gradient_present(args, role)
        try:
            ck = (id(formula), role, json_key(args))
        except TypeError:
            ck = None
        if ck is not None:
            hit = self._estimates.get(ck)
            if hit is not None:
                return hit
        try:
            est = formula.fn(Args(args, role))
        except NotModelled as e:
            est = Estimate(None, None, "", str(e))
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, AttributeError) as e:
            # Arguments of an unexpected form (a marker from an unknown writer): say so, do not crash.
            est = Estimate(None, None, "", f"arguments not understood by {formula.fn.__name__}: {e}")
        if ck is not None:
            self._estimates.add(ck, est)
        return est

    def model(self, d: dict, line: int = 0, idx: int = 0, raw: bytes | None = None) -> Result:
        """Model one record (a dict with Record's keys). ``line``/``idx``: its input line and record index
        (share mode); ``raw``: the line's bytes when ``d`` was decoded lean (read only to word a reason)."""
        get = d.get  # (this runs once per kernel: a dozen lookups of the method saved)
        kind = get("kind")
        if kind == "memcpy" or kind == "memset":
            n = get("bytes")
            ck = get("copy_kind")
            k = (kind, n, ck)
            hit = self._copies.get(k)
            if hit is None:
                hit = copy_result(kind, n, ck)
                self._copies.add(k, hit)
            return hit
        ops, mods = get("op"), get("mod")
        op = (ops if type(ops) is str else ops[0]) if ops else ""
        mod = (mods if type(mods) is str else mods[0]) if mods else ""
        direction = get("dir") or ""
        fwd = get("fwd") if direction == "bprop" else None
        args = get("args") or ()
        outputs = get("outputs")
        long_name = get("kLongName") or get("kShortName") or ""
        try:  # everything below except the call bookkeeping depends only on this key: computed once per key
            # Lean decoding (reader.lean_loads) leaves arguments as raw JSON: their bytes are the key.
            akey = (bytes(args) if type(args) is Raw else json_key(args)) if args else b""
            if outputs:
                akey += json_key(outputs)
            skey = (long_name, mod, op, direction, akey, _fwd_key(fwd) if fwd else b"")
        except TypeError:
            skey = akey = None
        s = self._static.get(skey) if skey is not None else None
        if s is None:
            if type(args) is Raw:
                args = self._args_value(args) or ()
            if outputs and type(outputs) is list and type(outputs[0]) is list and outputs[0]:
                # The output's shape where parse found it (emit_nvtx records no stride or kernel size): it joins
                # the arguments as what it is, the call's out= tensor, which formulas may read by that name.
                args = [*args, {"name": "out", "type": "tensor", "shape": outputs[0], "dtype": first_dtype(args)}]
            if fwd and type(fwd.get("args")) is Raw:
                fwd = {**fwd, "args": self._args_value(fwd["args"], level=3)}
            s = self._static_info(long_name, mod, op, direction, args, fwd, skey and skey[5], d, raw)
            if skey is not None:
                self._static.add(skey, s)
        if s.result is not None:  # no formula: the same answer for every kernel
            return s.result if s.joins is None else self._join(d, s, line, idx)
        # Which kernels of the call carry the numbers.
        sub = get("subSeqId")
        seq = get("seqId")
        # parse numbers the calls of a backward node, not of each aten op inside it: the op's arguments tell two
        # calls of one backward node apart. parse's call_id says which call a kernel is in; records without it
        # (older files) are told by their first sequence number (seqId lists those of the op stack down to the
        # kernel: the first is the call's own where its op is numbered, else an inner op's), their numbering and
        # their distance from the call's previous kernel.
        cid = get("call_id")
        key = (direction, op, None if cid is not None else (seq[0] if seq else None) if type(seq) is list else seq,
               get("callsite"), akey)
        tid = get("tid")
        st = self._calls.get(tid)
        if st is None or st.key != key or (st.call_id != cid if cid is not None else
                                           sub == 0 or line - st.last_line > WINDOW):
            blind = False
            if st is None:
                if sub != 0 and line < self.blind_until:
                    blind = True
                    if line >= self.watch_from:
                        self.uncertain = True
            elif st.more is not None:
                self._closed.append([st.first, *st.more])
            st = self._calls[tid] = OpCall(key, cid, line, line, s.fkey, blind)
        else:
            st.last_line = line
            if st.blind and line >= self.watch_from:
                self.uncertain = True
        if s.helper is not None:
            return s.helper
        if line - st.start_line > WINDOW:
            return s.late(op)
        st.mains += 1
        if s.grads:
            return self._gradient(st, s, d, idx, sub, op)
        if s.one_per_kernel:  # an aten GEMM/conv op inside a backward node runs one main kernel per call
            st.mains = 1
            st.first_sub = sub
            return self._result(s, s.role, op)
        if st.mains == 1:
            st.first_sub = sub
            res = s.results.get(s.role) or self._result(s, s.role, op)
            if self._share:
                st.first = (idx, d, res, res, s.tc)
            return res
        given = s.counted(st.first_sub, op)
        if self._share:
            _add(st, (idx, d, given, st.first[3], s.tc))
        return given

    def _gradient(self, st: OpCall, s: Static, d: dict, idx: int, sub, op: str) -> Result:
        """A main kernel of a backward GEMM/conv call: the gradient it computes, and its result (the first
        kernel of each gradient gets that gradient's numbers; later ones are counted on it)."""
        roles = st.roles
        if roles is None:
            roles = st.roles = ({}, {})  # nominal roles given; (FLOPs, bytes, params) -> (result, its sub)
        given, groups = roles
        role = s.named_role
        if role is None:  # the order decides; a third kernel continues the gradient before it (split-K)
            role = "dgrad" if "dgrad" not in given else "wgrad" if "wgrad" not in given else st.role
        given[role] = True
        st.role = role
        res = self._result(s, role, op)
        # The gradient really computed: a formula gives the role it was asked for the numbers of the one that
        # exists (the first layer's weight gradient only, convolution_backward's output_mask), params saying
        # which; kernels with the same numbers compute the same gradient and share it.
        key = (res.flops, res.bytes, res.params)
        group = groups.get(key)
        if group is None:
            groups[key] = (res, sub)
            if st.first_sub is None:
                st.first_sub = sub
            if self._share:
                entry = (idx, d, res, res, s.tc)
                if st.first is None:
                    st.first = entry
                else:
                    _add(st, entry)
            return res
        whole, first_sub = group
        given_now = s.counted(first_sub, op)
        if self._share:
            _add(st, (idx, d, given_now, whole, s.tc))
        return given_now

    def _join(self, d: dict, s: "Static", line: int, idx: int) -> Result:
        """A kernel of a backward node without arguments whose forward link is that of the call in progress
        on its thread (another node of the same forward op): it shares that call's numbers, or, in a GEMM,
        convolution or attention call, is one of its helpers."""
        st = self._calls.get(d.get("tid"))
        if st is None:
            if self.watch_from <= line < self.blind_until:
                self.uncertain = True
            return s.result
        if st.fwd_key != s.joins or not st.mains or line - st.last_line > WINDOW or line - st.start_line > WINDOW:
            return s.result
        st.last_line = line
        if st.blind and line >= self.watch_from:
            self.uncertain = True
        op = st.key[1]
        if s.matrix:
            return s.helper_of(op)
        given = s.counted(st.first_sub, op)
        if self._share:
            _add(st, (idx, d, given, st.first[3], s.tc))
        return given

    def settle(self, line: int | None = None) -> list[Fix]:
        """Close the op calls that can no longer gain a kernel: those closed by a later call on their thread,
        those more than WINDOW lines older than ``line``, and, without ``line`` (the end of the input), all.
        Returns the kernels whose result is not the one ``model`` gave them (share mode), in no order."""
        closed = self._closed
        for st in self._calls.values():
            if st.first is not None and (line is None or line - st.start_line > WINDOW):
                if st.more is not None:
                    closed.append([st.first, *st.more])
                st.first = st.more = None
        fixes: list = []
        for entries in closed:
            fixes += shares(entries)
        closed.clear()
        return fixes

    def oldest_open(self) -> int | None:
        """The index of the earliest record whose result may still change (a sharing kernel of a call that is
        not closed; call ``settle`` first), or None."""
        return min((st.first[0] for st in self._calls.values() if st.first is not None), default=None)

    def open_threads(self, before: int) -> set:
        """The threads whose call in progress holds a sharing kernel of index below ``before``."""
        return {tid for tid, st in self._calls.items() if st.first is not None and st.first[0] < before}

    def _result(self, s: "Static", role: str, op: str) -> Result:
        res = s.results.get(role)
        if res is None:
            est = self.estimate(s.formula, s.args, role)
            if est.reason and est.flops is None and not s.args:
                est = est._replace(reason=s.no_args)
            params = est.params + ",dtype-from-kernel" if s.guessed and est.params else est.params
            res = s.results[role] = Result(est.flops, est.bytes, params, s.tc, est.reason, s.family, s.dtype, role,
                                           est.tc_dims)
        return res

    def _node_formula(self, op: str) -> Formula | None:
        """The formula of the aten op an autograd node's name says it differentiates (lookup.node_op), if any."""
        aten = node_op(op)
        if aten is None:
            return None
        return self.resolve("", aten) or self.resolve("", "aten::_" + aten[len("aten::"):])

    def _static_info(self, long_name: str, mod: str, op: str, direction: str, args, fwd, fkey, d: dict,
                     raw) -> "Static":
        formula = self.resolve(mod, op) if op else None
        role = "fprop"
        borrowed = False
        if direction == "bprop":
            f = fwd or {}
            f_ops, f_mods = as_list(f.get("op")), as_list(f.get("mod"))
            ff = self.resolve(f_mods[0] if f_mods else "", f_ops[0]) if f_ops else None
            if ff is not None and not (formula is not None and args):
                # A kernel whose innermost range is its autograd node (no aten op inside it: a graph captured
                # before the profiled range, pyprof.nvtx.graphs) is of the kind of op the node differentiates.
                own = formula if formula is not None else self._node_formula(op)
                if own is not None and own.family != ff.family:
                    # The backward op has no arguments and its forward link names another kind of op: not
                    # the op's own forward (another autograd node of the same forward call, e.g. the
                    # LogSoftmaxBackward0 of a cross_entropy). Its shapes are not borrowed; the kernel joins
                    # the call of the node that carries the forward op's backward, when one is in progress.
                    s = Static.fixed(Result(
                        None, None, "", tc_state(long_name, False, None),
                        f"no arguments recorded for {op}, and its forward link ({f_ops[0]}) is a different kind "
                        "of op", "", None, "bprop"))
                    s.joins = fkey or None
                    s.name, s.family, s.role, s.matrix = long_name, ff.family, "bprop", ff.family in TC_FAMILIES
                    s.dtype = first_dtype(f.get("args") or [])
                    s.tc = tc_state(long_name, False, s.dtype)
                    return s
                formula, args, role, borrowed = ff, f.get("args") or [], "bprop", True
        s = Static()
        s.name = long_name
        if formula is None:
            reason = ("no op (kernel outside any op range)" if not op
                      else f"no formula for {mod + '.' if mod and '::' not in op else ''}{op}")
            if direction == "bprop" and not fwd:
                reason += " and no forward link"
            s.result = Result(None, None, "", tc_state(long_name, False, None), reason, "", None, role)
            return s
        args, s.guessed = fill_dtypes(list(args), long_name)
        if formula.family in TC_FAMILIES:
            args, s.guessed = autocast(args, long_name, s.guessed)
        s.formula, s.args, s.role, s.family = formula, args, role, formula.family
        s.fkey = fkey if borrowed else None
        s.no_args = None if args else no_arguments(op, d, raw)
        s.matrix = matrix = s.family in TC_FAMILIES
        s.dtype = first_dtype(args)
        s.grads = (role == "bprop" or formula.backward) and s.family in GRAD_FAMILIES
        s.named_role = named_role(long_name) if s.grads else None
        s.one_per_kernel = direction == "bprop" and role == "fprop" and not formula.backward and \
            s.family in GRAD_FAMILIES
        s.tc = tc_state(long_name, matrix, s.dtype)
        if matrix and is_helper(long_name):
            s.helper = s.helper_of(op)
        return s


def _add(st: OpCall, entry: tuple) -> None:
    """One more sharing kernel of the call ``st``."""
    more = st.more
    if more is None:
        st.more = [entry]
    else:
        more.append(entry)
