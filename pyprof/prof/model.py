"""From a record to its numbers: which formula, in which role, given to which kernel of the op call.

Rule for an op call that launches several kernels (docs/formulas.md, "Which kernel carries the FLOPs"):
the call's FLOPs and bytes go to its *main* kernel; the other kernels of the call show ``na`` with the
reason "counted on sub N". For GEMM, convolution and attention ops the main kernel is the first kernel that
is not a recognised helper (layout transposes, split-K reductions, element-wise bias or cast kernels, flash
attention's pre/post-processing); for every other op it is the first kernel of the call. In a backward
GEMM/convolution call, the first two main kernels are dgrad and wgrad: a name that says ``dgrad``/``wgrad``
decides, otherwise the order does (autograd computes the input's gradient before the weight's). So every
op call's FLOPs are counted once, and per-step totals can be compared with torch.utils.flop_counter.

A call is the run of kernels on one thread with the same direction, op, sequence ids, call site and
arguments; a kernel with ``subSeqId`` 0 starts a new one (parse numbers the kernels of a whole backward node,
so the arguments tell its aten ops apart).
"""
from __future__ import annotations

import json
import re
from typing import NamedTuple

from pyprof.prof import registry
from pyprof.prof.args import Args
from pyprof.prof.reader import Raw, raw_value
from pyprof.prof.registry import COUNTED_FAMILIES, TC_FAMILIES, Estimate, Formula, NotModelled
from pyprof.prof.tensorcores import dtype_from_kernel_name, tc_column, tc_used

try:  # orjson is optional: a faster cache key (and faster reading, see reader.py)
    from orjson import dumps as _key  # obj -> bytes; bound directly: called once per row
except ImportError:  # pragma: no cover - exercised where orjson is absent
    def _key(obj) -> bytes:  # bytes, as orjson's: keys join raw JSON bytes (lean decoding)
        return json.dumps(obj, separators=(",", ":")).encode()

# Kernels that only help a GEMM/conv/attention call. Names that are always helpers:
HELPER_KERNEL = re.compile(
    r"nchwToNhwc|nhwcToNchw|AddPaddingKernel|RemovePaddingKernel|init_device_workspace|splitKreduce|"
    r"split_k_reduce|reduce_1Block|reduce_wgrad|CatArrayBatchedCopy|computeOffsets|scal_kernel|scalePackedTensor|"
    r"epilogue::impl|xmma\w*_execute_split_k_kernel|"
    r"dot_do_o|convert_dq|clear_dq|at::native::.*reduce_kernel|cunn_SoftMax|softmax_warp", re.IGNORECASE)
# Names that are helpers unless they also say they multiply matrices (a GEMM with a fused bias epilogue is
# the main kernel, not a helper):
_WEAK_HELPER = re.compile(r"transpose|elementwise_kernel|fill_kernel|memset|copy_kernel|im2col|col2im|cast_kernel|"
                          r"convert_kernel|_bias_|bias_kernel|scale_kernel|reduce_kernel|epilogue_kernel",
                          re.IGNORECASE)
_MATMUL = re.compile(r"gemm|xmma|nvjet|tensorop|implicit|fprop|dgrad|wgrad|flash_fwd|flash_bwd_dq|fmha|sdpa",
                     re.IGNORECASE)
_helper_cache: dict[str, bool] = {}


def _fwd_key(fwd: dict) -> bytes:
    """The part of the model's cache key that a forward link decides (its arguments may be raw JSON)."""
    a = fwd.get("args")
    return _key((fwd.get("mod"), fwd.get("op"))) + (bytes(a) if type(a) is Raw else _key(a))


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


def is_helper(name: str) -> bool:
    """True for kernels that only help a GEMM/conv/attention call (transposes, split-K reductions, casts ...)."""
    v = _helper_cache.get(name)
    if v is None:
        if len(_helper_cache) > 65536:
            _helper_cache.clear()
        v = bool(HELPER_KERNEL.search(name) or (_WEAK_HELPER.search(name) and not _MATMUL.search(name)))
        _helper_cache[name] = v
    return v


_DGRAD = re.compile(r"dgrad", re.IGNORECASE)
_WGRAD = re.compile(r"wgrad", re.IGNORECASE)
_DUNDER = {"radd": "add", "iadd": "add", "rsub": "rsub", "isub": "sub", "rmul": "mul", "imul": "mul",
           "truediv": "div", "rtruediv": "div", "itruediv": "div", "div": "div", "rdiv": "div", "idiv": "div",
           "floordiv": "floor_divide", "rfloordiv": "floor_divide", "ifloordiv": "floor_divide",
           "mod": "remainder", "rmod": "remainder", "imod": "remainder", "pow": "pow", "rpow": "pow",
           "ipow": "pow", "and": "bitwise_and", "iand": "bitwise_and", "rand": "bitwise_and",
           "or": "bitwise_or", "ior": "bitwise_or", "ror": "bitwise_or", "xor": "bitwise_xor",
           "ixor": "bitwise_xor", "rxor": "bitwise_xor", "invert": "bitwise_not", "neg": "neg", "abs": "abs",
           "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift", "imatmul": "matmul"}


class Result(NamedTuple):
    """The modelled numbers of one kernel row."""

    flops: int | None
    bytes: int | None
    params: str
    tc: str
    reason: str | None  # why flops/bytes are na (None when both are modelled)
    family: str  # formula family, '' when no formula
    dtype: str | None  # the op's input dtype (None when unknown)
    role: str


def candidates(mod: str, op: str) -> list[str]:
    """Registry keys tried, in order, for a marker's module and op name (in-place, dunder, overload and
    method spellings reduced to the function's name)."""
    out = []
    if "::" in op:
        ns, name = op.split("::", 1)
        name = name.split(".", 1)[0]  # aten::add.Tensor -> add
        out += [op, f"{ns}::{name}"]
        base = name
    else:
        if mod:
            out.append(f"{mod}.{op}")
        base = op
    if base.startswith("__") and base.endswith("__") and len(base) > 4:
        inner = base[2:-2]
        base = _DUNDER.get(inner, inner)
    elif base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    for m in ([mod] if mod and "::" not in op else []) + ["torch", "torch.nn.functional", "torch.Tensor"]:
        out.append(f"{m}.{base}")
    out.append(f"aten::{base}")
    seen = set()
    return [c for c in out if not (c in seen or seen.add(c))]


class Modeller:
    """Stateful across rows only for the kernel-of-a-call bookkeeping; formulas stay pure."""

    # Every record key ``model`` reads (lean decoding reads only these and the output's columns; a test
    # checks the rows equal those of the full decode on real captures).
    RECORD_KEYS = ("kind", "bytes", "copy_kind", "op", "mod", "dir", "fwd", "args", "kLongName", "kShortName",
                   "subSeqId", "seqId", "callsite", "tid")

    def __init__(self) -> None:
        self._resolved: dict[tuple[str, str], Formula | None] = {}
        self._estimates: dict = {}
        self._calls: dict = {}  # tid -> [call key, main kernels seen, first main sub, roles given]
        self._static: dict = {}  # (kernel, mod, op, dir, args, fwd) -> _Static
        self._copies: dict = {}  # (kind, bytes, copy kind) -> Result

    def reset_calls(self) -> None:
        """Forget the op calls in progress (a worker starting a new chunk)."""
        self._calls.clear()

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
            ck = (id(formula), role, _key(args))
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
            if len(self._estimates) > 200_000:
                self._estimates.clear()
            self._estimates[ck] = est
        return est

    def model(self, d: dict) -> Result:
        """Model one record (a dict with Record's keys)."""
        kind = d.get("kind")
        if kind == "memcpy" or kind == "memset":
            n = d.get("bytes")
            ck = d.get("copy_kind")
            k = (kind, n, ck)
            hit = self._copies.get(k)
            if hit is None:
                if len(self._copies) > 10_000:
                    self._copies.clear()
                hit = self._copies[k] = _copy_result(kind, n, ck)
            return hit
        ops, mods = d.get("op"), d.get("mod")
        op = (ops if type(ops) is str else ops[0]) if ops else ""
        mod = (mods if type(mods) is str else mods[0]) if mods else ""
        direction = d.get("dir") or ""
        fwd = d.get("fwd") if direction == "bprop" else None
        args = d.get("args") or ()
        long_name = d.get("kLongName") or d.get("kShortName") or ""
        try:  # everything below except the call bookkeeping depends only on this key: computed once per key
            # Lean decoding (reader.lean_loads) leaves arguments as raw JSON: their bytes are the key.
            akey = (bytes(args) if type(args) is Raw else _key(args)) if args else b""
            fkey = _fwd_key(fwd) if fwd else b""
            skey = (long_name, mod, op, direction, akey, fkey)
        except TypeError:
            skey = akey = None
        st_info = self._static.get(skey) if skey is not None else None
        if st_info is None:
            if type(args) is Raw:
                args = raw_value(args) or ()
            if fwd and type(fwd.get("args")) is Raw:
                fwd = {**fwd, "args": raw_value(fwd["args"])}
            st_info = self._static_info(long_name, mod, op, direction, args, fwd)
            if skey is not None:
                if len(self._static) > 100_000:
                    self._static.clear()
                self._static[skey] = st_info
        if st_info.result is not None:  # no formula: the same answer for every kernel
            return st_info.result
        # Which kernel of the call carries the numbers.
        sub = d.get("subSeqId")
        seq = d.get("seqId")
        # parse numbers the kernels of a backward node, not of each aten op inside it: the op's arguments
        # tell two calls of one backward node apart.
        # seqId lists the sequence numbers of the op stack down to the kernel; the first is the call's own.
        key = (direction, op, (seq[0] if seq else None) if type(seq) is list else seq, d.get("callsite"), akey)
        tid = d.get("tid")
        st = self._calls.get(tid)
        if st is None or sub == 0 or st[0] != key:
            st = [key, 0, None, None]  # the roles given: a set, made when a GEMM/conv backward needs one
            self._calls[tid] = st
        if st_info.helper is not None:
            return st_info.helper
        st[1] += 1
        role = st_info.role
        if st_info.one_per_kernel:  # an aten GEMM/conv op inside a backward node runs one main kernel per call
            st[1] = 1
        if st_info.grads and st[3] is None:
            st[3] = set()
        if st[1] > 1:
            kernel_role = None
            if st_info.grads:
                kernel_role = _grad_role(long_name, st[3])
            if kernel_role is None:
                return st_info.counted(st[2], op)
            role = kernel_role
        else:
            st[2] = sub
            if st_info.grads:
                role = _grad_role(long_name, st[3]) or role
        res = st_info.results.get(role)
        if res is None:
            est = self.estimate(st_info.formula, st_info.args, role)
            if est.reason and est.flops is None and not st_info.args:
                est = est._replace(reason=f"the marker recorded no arguments for {op} (PyTorch's emit_nvtx "
                                          "without record_shapes=True records names only)")
            params = est.params + ",dtype-from-kernel" if st_info.guessed and est.params else est.params
            res = st_info.results[role] = Result(est.flops, est.bytes, params, st_info.tc, est.reason,
                                                 st_info.family, st_info.dtype, role)
        return res

    def _static_info(self, long_name: str, mod: str, op: str, direction: str, args, fwd) -> "_Static":
        formula = self.resolve(mod, op) if op else None
        role = "fprop"
        if direction == "bprop":
            f = fwd or {}
            f_ops, f_mods = _as_list(f.get("op")), _as_list(f.get("mod"))
            ff = self.resolve(f_mods[0] if f_mods else "", f_ops[0]) if f_ops else None
            if ff is not None and not (formula is not None and args):
                if formula is not None and formula.family != ff.family:
                    # The backward op has no arguments and its forward link names another kind of op: the
                    # link is not the op's own forward (a capture-side mismatch); do not borrow its shapes.
                    return _Static.fixed(Result(
                        None, None, "", tc_column(long_name, False, None),
                        f"no arguments recorded for {op}, and its forward link ({f_ops[0]}) is a different kind "
                        "of op", "", None, role))
                formula, args, role = ff, f.get("args") or [], "bprop"
        s = _Static()
        s.name = long_name
        if formula is None:
            reason = ("no op (kernel outside any op range)" if not op
                      else f"no formula for {mod + '.' if mod and '::' not in op else ''}{op}")
            if direction == "bprop" and not fwd:
                reason += " and no forward link"
            s.result = Result(None, None, "", tc_column(long_name, False, None), reason, "", None, role)
            return s
        args, s.guessed = _fill_dtypes(list(args), long_name)
        if formula.family in TC_FAMILIES:
            args, s.guessed = _autocast(args, long_name, s.guessed)
        s.formula, s.args, s.role, s.family = formula, args, role, formula.family
        matrix = s.family in TC_FAMILIES
        s.dtype = _first_dtype(args)
        s.grads = (role == "bprop" or formula.backward) and s.family in ("gemm", "conv")
        s.one_per_kernel = direction == "bprop" and role == "fprop" and not formula.backward and \
            s.family in ("gemm", "conv")
        s.tc = tc_column(long_name, matrix, s.dtype)
        if matrix and is_helper(long_name):
            s.helper = Result(None, None, "", "1" if tc_used(long_name) else "-",
                              f"helper kernel of {op} (its FLOPs are on the call's main kernel)", s.family, s.dtype,
                              role)
        return s


class _Static:
    """What a kernel name, op and arguments decide once: formula, role, family, dtype, tc, results by role."""

    __slots__ = ("formula", "args", "role", "family", "dtype", "grads", "tc", "helper", "result", "results",
                 "_counted", "guessed", "one_per_kernel", "name")

    def __init__(self) -> None:
        self.helper = self.result = None
        self.results: dict = {}
        self._counted: dict = {}

    @classmethod
    def fixed(cls, result: Result) -> "_Static":
        """Every kernel with this key gets ``result`` (no formula, or nothing it could use)."""
        s = cls()
        s.result = result
        return s

    def counted(self, sub, op: str) -> Result:
        r = self._counted.get(sub)
        if r is None:
            # Not the call's main kernel: Tensor Cores '0' only if its own name says it multiplies matrices.
            r = self._counted[sub] = Result(None, None, "", tc_column(self.name, False, self.dtype),
                                            f"counted on sub {sub} of the same {op} call", self.family, self.dtype,
                                            self.role)
        return r


def _copy_result(kind: str, n, ck) -> Result:
    """The row of a memcpy or memset of ``n`` bytes."""
    p = f"{ck or kind},{n}B"
    # A copy to or from the host (or another GPU) is bound by PCIe/NVLink, not by this GPU's memory:
    # family "transfer" keeps it out of the roofline.
    fam = "memory" if kind == "memset" or ck in ("DtoD", "DeviceToDevice") else "transfer"
    if n is None:
        return Result(0, None, p, "-", f"{kind} without a size", fam, None, "")
    return Result(0, int(n), p, "-", None, fam, None, "")


def _grad_role(name: str, given: set) -> str | None:
    """dgrad or wgrad for a backward GEMM/conv kernel not yet given; None when both were given."""
    if _DGRAD.search(name):
        role = "dgrad"
    elif _WGRAD.search(name):
        role = "wgrad"
    else:
        role = "dgrad" if "dgrad" not in given else "wgrad"
    if role in given:
        return None
    given.add(role)
    return role


def _as_list(v) -> list:
    """A marker list field that a writer may also give as a single string (the forward link's mod/op)."""
    if not v:
        return []
    return [v] if isinstance(v, str) else list(v)


def _fill_dtypes(args: list, kernel_name: str) -> tuple[list, bool]:
    """Give tensors without a dtype the one the kernel's name states (emit_nvtx-only markers record shapes
    only). A modelling shortcut: the params string then ends with ``dtype-from-kernel``. Returns (args, filled)."""
    missing = any(isinstance(e, dict) and (("shape" in e and not e.get("dtype")) or
                                           any(isinstance(i, dict) and not i.get("dtype") for i in e.get("items") or ()))
                  for e in args)
    if not missing:
        return args, False
    guess = dtype_from_kernel_name(kernel_name)
    if guess is None:
        return args, False
    out = []
    for e in args:
        if isinstance(e, dict) and "shape" in e and not e.get("dtype"):
            e = {**e, "dtype": guess}
        elif isinstance(e, dict) and e.get("items"):
            e = {**e, "items": [{**i, "dtype": guess} if isinstance(i, dict) and not i.get("dtype") else i
                                for i in e["items"]]}
        out.append(e)
    return out, True


_LOW_PRECISION = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})


def _autocast(args: list, kernel_name: str, guessed: bool) -> tuple[list, bool]:
    """Under autocast an op's fp32 arguments are cast inside it and its GEMM/conv kernel runs in fp16/bf16;
    the kernel's name says so. Then the fp32 tensors are taken at the kernel's dtype (bytes, roofline peak),
    and the params string ends with ``dtype-from-kernel``."""
    kd = dtype_from_kernel_name(kernel_name)
    if kd not in _LOW_PRECISION or not any(isinstance(e, dict) and e.get("dtype") == "float32" for e in args):
        return args, guessed
    out = []
    for e in args:
        if isinstance(e, dict) and "shape" in e and e.get("dtype") == "float32":
            e = {**e, "dtype": kd}
        out.append(e)
    return out, True


def _first_dtype(args: list) -> str | None:
    for e in args:
        if isinstance(e, dict):
            if "shape" in e:
                return e.get("dtype")
            items = e.get("items")
            if items and isinstance(items[0], dict):
                return items[0].get("dtype")
    return None


def counted_by_flop_counter(family: str) -> bool:
    """True for the families whose FLOPs torch.utils.flop_counter counts (GEMM, convolution, attention)."""
    return family in COUNTED_FAMILIES
