"""The numbers of one kernel row (``Result``) and what a kernel name, op and arguments decide once (``Static``):
formula, role, family, dtype, tc, and the results given to the kernels of a call that are not its first."""
from __future__ import annotations

from typing import NamedTuple

from pyprof.prof.model.registry import Family
from pyprof.prof.model.share import WINDOW
from pyprof.prof.model.tensorcores import tc_state, tc_used


class Result(NamedTuple):
    """The modelled numbers of one kernel row."""

    flops: int | None
    bytes: int | None
    params: str
    tc: bool | None  # on Tensor Cores: True, False (eligible, not used), None (n/a); tensorcores.TC_TEXT
    reason: str | None  # why flops/bytes are na (None when both are modelled)
    family: str  # the formula's registry.Family, '' when no formula
    dtype: str | None  # the op's input dtype (None when unknown)
    role: str  # fprop, bprop, dgrad, wgrad; "" for a copy or memset (copy_result), which no op role applies to
    tc_dims: tuple = ()  # the formula's Estimate.tc_dims

    @property
    def is_copy(self) -> bool:
        """A memcpy's or memset's result (copy_result), not a kernel's."""
        return self.role == ""


class Pending(Result):
    """The result given to a further kernel of an op call (``counted on sub N``) before the call is closed: in
    share mode its share always replaces it, so the pipeline makes its row only then."""

    __slots__ = ()


class Static:
    """What a kernel name, op and arguments decide once: formula, role, family, dtype, tc, results by role."""

    __slots__ = ("formula", "args", "role", "family", "dtype", "grads", "tc", "helper", "result", "results",
                 "_counted", "guessed", "one_per_kernel", "name", "fkey", "joins", "matrix", "no_args",
                 "named_role", "_helpers")

    def __init__(self) -> None:
        self.helper = self.result = self.fkey = self.joins = self.named_role = None
        self.family, self.role, self.name, self.dtype, self.matrix = "", "fprop", "", None, False
        self.results: dict = {}
        self._counted: dict = {}
        self._helpers: dict = {}

    @classmethod
    def fixed(cls, result: Result) -> "Static":
        """Every kernel with this key gets ``result`` (no formula, or nothing it could use)."""
        s = cls()
        s.result = result
        return s

    def counted(self, sub, op: str) -> Result:
        """The result given to a further kernel of a call, before the call is closed."""
        k = (sub, op)
        r = self._counted.get(k)
        if r is None:
            # Not the call's main kernel: Tensor Cores '0' only if its own name says it multiplies matrices.
            r = self._counted[k] = Pending(None, None, "", tc_state(self.name, False, self.dtype),
                                           f"counted on sub {sub} of the same {op} call", self.family, self.dtype,
                                           self.role)
        return r

    def late(self, op: str) -> Result:
        """A kernel more than WINDOW input lines after the start of its call: it shares nothing (the call's
        kernels before it carry the numbers)."""
        k = ("late", op)
        r = self._counted.get(k)
        if r is None:
            r = self._counted[k] = Result(
                None, None, "", tc_state(self.name, False, self.dtype),
                f"counted on the first kernels of the same {op} call (this one comes more than {WINDOW} input lines "
                "after its start)", self.family, self.dtype, self.role)
        return r

    def helper_of(self, op: str) -> Result:
        """The result of a helper kernel of an ``op`` call."""
        r = self._helpers.get(op)
        if r is None:
            r = self._helpers[op] = Result(None, None, "", True if tc_used(self.name) else None,
                                           f"helper kernel of {op} (its FLOPs are on the call's main kernels)",
                                           self.family, self.dtype, self.role)
        return r


def no_arguments(op: str, d: dict, raw) -> str:
    """Why a record of ``op`` has no arguments, worded for the tool that recorded it: pyprof op markers are in
    ``marker``, PyTorch's emit_nvtx ranges in ``seqMarker`` (``, seq = ``/``op_id = ``) when parse kept them
    (``--raw-markers``); a PyTorch-profiler trace's records have neither. Without the texts (schema 3 by
    default), an Nsight Systems or nvprof export is told by its per-kernel static shared memory, which
    PyTorch-profiler traces never give. Lean decoding skips those fields: then the line's bytes tell."""
    mk, sm = d.get("marker"), d.get("seqMarker")
    if mk is None and sm is None and raw is not None:
        source = ("pyprof" if b'"pyprof":' in raw else
                  "emit_nvtx" if b", seq = " in raw or b"op_id = " in raw or
                  (b'"static_smem_bytes":' in raw and b'"static_smem_bytes":null' not in raw) else "kineto")
    elif mk and any(type(m) is str or (type(m) is dict and "pyprof" in m) for m in mk):
        source = "pyprof"
    elif any(type(x) is str and (", seq = " in x or "op_id = " in x) for x in sm or ()):
        source = "emit_nvtx"
    elif not sm and d.get("static_smem_bytes") is not None:
        source = "emit_nvtx"
    else:
        source = "kineto"
    if source == "pyprof":
        return f"the pyprof marker of {op} recorded no arguments"
    if source == "emit_nvtx":
        return (f"no arguments recorded for {op}: its range is autograd's own (emit_nvtx), which names the op only: "
                "pyprof.init() leaves its shapes out for their cost, emit_nvtx(record_shapes=True) records them")
    return f"the PyTorch profiler recorded no input shapes for {op} (torch.profiler.profile(record_shapes=True) " \
           "records them)"


def copy_result(kind: str, n, ck) -> Result:
    """The row of a memcpy or memset of ``n`` bytes."""
    p = f"{ck or kind},{n}B"
    # A copy to or from the host (or another GPU) is bound by PCIe/NVLink, not by this GPU's memory:
    # Family.TRANSFER keeps it out of the roofline.
    fam = Family.MEMORY if kind == "memset" or ck in ("DtoD", "DeviceToDevice") else Family.TRANSFER
    if n is None:
        return Result(0, None, p, None, f"{kind} without a size", fam, None, "")
    return Result(0, int(n), p, None, None, fam, None, "")


def first_name(v, default=None):
    """The first name of a record's ``mod`` or ``op`` (or its forward link's), which a writer may give as one
    string (docs/record.md): the string is the name, not a list of its letters. ``default`` when there is none."""
    if type(v) is str:
        return v or default
    return v[0] if v else default


def as_list(v) -> list:
    """A marker list field that a writer may also give as a single string (the forward link's mod/op)."""
    if not v:
        return []
    return [v] if isinstance(v, str) else list(v)


def first_dtype(args: list) -> str | None:
    for e in args:
        if isinstance(e, dict):
            if "shape" in e:
                return e.get("dtype")
            items = e.get("items")
            if items and isinstance(items[0], dict):
                return items[0].get("dtype")
    return None
