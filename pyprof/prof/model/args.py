"""A read-only view of one op call's decoded arguments (docs/markers.md), for formulas.

Formulas ask for tensors and scalars by position or keyword and raise ``NotModelled`` (through the helpers
here) when an argument they need is missing, so that the row says ``na`` and why.
"""
from __future__ import annotations

from math import prod
from typing import Any, Sequence

from pyprof.prof.model.registry import NotModelled

# Every spelling of a dtype seen in markers, PyTorch traces ("Input type") and legacy PyProf dict lines,
# mapped to (canonical torch name, bytes per element, short name used in params).
_DTYPES: dict[str, tuple[str, int, str]] = {}


def _add(canonical: str, size: int, short: str, *spellings: str) -> None:
    for s in (canonical, f"torch.{canonical}", *spellings):
        _DTYPES[s] = (canonical, size, short)


_add("float64", 8, "fp64", "double", "torch.double")
_add("float32", 4, "fp32", "float", "torch.float")
_add("float16", 2, "fp16", "half", "torch.half", "c10::Half")
_add("bfloat16", 2, "bf16", "c10::BFloat16")
_add("float8_e4m3fn", 1, "fp8", "c10::Float8_e4m3fn", "float8_e4m3fnuz")
_add("float8_e5m2", 1, "fp8", "c10::Float8_e5m2", "float8_e5m2fnuz")
_add("float8_e8m0fnu", 1, "fp8")
_add("int64", 8, "int64", "long", "long int", "int64_t", "long long")
_add("int32", 4, "int32", "int", "int32_t")
_add("int16", 2, "int16", "short", "short int")
_add("int8", 1, "int8", "signed char")
_add("uint8", 1, "uint8", "unsigned char")
_add("bool", 1, "bool")
_add("complex64", 8, "c64", "c10::complex<float>")
_add("complex128", 16, "c128", "c10::complex<double>")


def dtype_info(dtype: str | None) -> tuple[str, int, str] | None:
    """Return (canonical name, bytes per element, short name) for any known spelling, else None."""
    return _DTYPES.get(dtype) if dtype else None


def itemsize(dtype: str | None) -> int:
    """Bytes per element of ``dtype``. Raises NotModelled when the dtype is unknown (emit_nvtx-only markers)."""
    info = _DTYPES.get(dtype) if dtype else None
    if info is None:
        raise NotModelled("dtype unknown" if not dtype else f"dtype {dtype} unknown")
    return info[1]


def short_dtype(dtype: str | None) -> str:
    """Short dtype for params strings (``bf16``); ``dtype?`` when unknown."""
    info = _DTYPES.get(dtype) if dtype else None
    return info[2] if info else (dtype or "dtype?")


def shape_str(shape: Sequence[int]) -> str:
    """``(8,512,1024)`` without spaces, so that space-separated output keeps one field per column."""
    return "(" + ",".join(map(str, shape)) + ")"


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcast of shapes. Raises NotModelled when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -i:
                d = s[i]
                if d != 1:
                    if size not in (1, d):
                        raise NotModelled(f"shapes {' '.join(shape_str(x) for x in shapes)} do not broadcast")
                    size = d
        out.append(size)
    return tuple(out)


class Tensor:
    """One tensor argument: shape and dtype (dtype may be None)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[int], dtype: str | None):
        self.shape = tuple(map(int, shape))
        self.dtype = dtype

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        """numel × itemsize; raises NotModelled when the dtype is unknown."""
        return prod(self.shape) * itemsize(self.dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.shape}, {self.dtype})"


def _tensor(entry: dict) -> Tensor:
    shape = entry.get("shape")
    if shape is None:
        raise NotModelled("tensor argument without a shape")
    return Tensor(shape, entry.get("dtype"))


def _normalise(e: dict) -> dict:
    """PyTorch traces give a tensor list as one tensor entry whose shape is a list of shapes (dtype
    ``TensorList``): make it a tensorlist entry (dtypes unknown)."""
    shape = e.get("shape")
    if shape and isinstance(shape[0], (list, tuple)):
        out = {"type": "tensorlist", "items": [{"type": "tensor", "shape": list(s), "dtype": None} for s in shape]}
        if e.get("name"):
            out["name"] = e["name"]
        return out
    return e


class Args:
    """The arguments of one call in marker order (positional first, then keywords with a ``name``).

    ``role`` is what the kernel computes: ``fprop``, ``bprop`` (a whole backward), or for GEMMs and
    convolutions ``dgrad`` / ``wgrad``.
    """

    __slots__ = ("entries", "role", "_positional")

    def __init__(self, entries: Sequence[Any], role: str = "fprop"):
        self.entries = [_normalise(e) for e in entries if isinstance(e, dict)]
        self.role = role
        self._positional = [e for e in self.entries if not e.get("name")]

    def _find(self, name: str | None, pos: int | None) -> dict | None:
        if name is not None:
            for e in self.entries:
                if e.get("name") == name:
                    return e
        if pos is not None and 0 <= pos < len(self._positional):
            return self._positional[pos]
        return None

    def tensor(self, pos: int, name: str | None = None, optional: bool = False) -> Tensor | None:
        """The tensor at positional index ``pos`` (or keyword ``name``).

        Returns None for an absent or None optional argument; raises NotModelled otherwise.
        """
        e = self._find(name, pos)
        if e is None or e.get("type") in ("none", None) and "shape" not in e:
            if optional:
                return None
            raise NotModelled(f"argument {name or pos} missing")
        if e.get("type") == "tensorlist" or "items" in e:
            raise NotModelled(f"argument {name or pos} is a tensor list")
        if "shape" not in e:
            if optional and e.get("type") != "tensor":
                return None
            raise NotModelled(f"argument {name or pos} is not a tensor")
        return _tensor(e)

    def tensors(self) -> list[Tensor]:
        """Every tensor argument, tensor lists flattened, in order."""
        out = []
        for e in self.entries:
            if "items" in e:
                out.extend(_tensor(i) for i in e["items"] if isinstance(i, dict))
            elif "shape" in e:
                out.append(_tensor(e))
        return out

    def lists(self) -> list[list[Tensor]]:
        """Each tensor-list or tensor argument as a list, in order (foreach and fused optimizer ops)."""
        out = []
        for e in self.entries:
            if "items" in e:
                out.append([_tensor(i) for i in e["items"] if isinstance(i, dict)])
            elif "shape" in e:
                out.append([_tensor(e)])
        return out

    def tensorlist(self, pos: int, name: str | None = None) -> list[Tensor]:
        """The tensor list at ``pos`` / ``name`` (a single tensor counts as a list of one)."""
        e = self._find(name, pos)
        if e is None:
            raise NotModelled(f"argument {name or pos} missing")
        if "items" in e:
            return [_tensor(i) for i in e["items"] if isinstance(i, dict)]
        if "shape" in e:
            return [_tensor(e)]
        raise NotModelled(f"argument {name or pos} is not a tensor list")

    def value(self, pos: int | None, name: str | None = None, default: Any = None, required: bool = False) -> Any:
        """The scalar (or tuple, str, dtype name) at ``pos`` / ``name``; ``default`` when absent or None.

        A missing argument is taken to be PyTorch's default: markers record every argument the user passed.
        ``required``: the estimate depends on this value, so an argument that is present but whose value
        was not recorded (emit_nvtx writes ``[]`` for every non-tensor) raises NotModelled instead of
        silently taking the default (a stride-2 convolution counted as stride 1 would be 4x off).
        """
        e = self._find(name, pos)
        if e is not None and required and "value" not in e and "shape" not in e and "items" not in e:
            # An argument the capture names without its value: emit_nvtx's [] for every non-tensor, a PyTorch
            # 1.8/1.9 trace's "GenericList" without Concrete Inputs. Never the default: a stride-2 convolution
            # taken as stride 1 would be counted 4x.
            raise NotModelled(f"{name or f'argument {pos}'} not recorded ("
                              + ("PyTorch's emit_nvtx records tensor sizes only" if e.get("type") == "unknown"
                                 else "the trace gives its type, not its value")
                              + "; pyprof.init() records every argument)")
        if e is None or "shape" in e or "items" in e:
            return default
        v = e.get("value")
        return default if v is None else v

    def ints(self, pos: int | None, name: str | None, ndim: int, default: int) -> tuple[int, ...]:
        """An int-or-tuple argument (stride, padding ...) expanded to ``ndim`` values."""
        v = self.value(pos, name, default, required=True)
        if isinstance(v, str):
            raise NotModelled(f"{name}={v!r} not modelled")
        if isinstance(v, (list, tuple)):
            if len(v) == 1:
                v = list(v) * ndim
            if len(v) != ndim:
                raise NotModelled(f"{name} has {len(v)} values for {ndim} dimensions")
            return tuple(int(x) for x in v)
        return (int(v),) * ndim


def moved(*terms: tuple[int, str | None]) -> int | None:
    """Bytes for (element count, dtype) terms; None when any dtype is unknown (FLOPs can still be known)."""
    total = 0
    for n, dtype in terms:
        info = _DTYPES.get(dtype) if dtype else None
        if info is None:
            return None
        total += n * info[1]
    return total


def estimate(flops: int, io: Sequence[tuple[int, str | None]], params: str, tc_dims: tuple = ()):
    """Build an Estimate from FLOPs, (numel, dtype) read/write terms, params and the sizes Tensor Cores want
    aligned (Estimate.tc_dims); bytes ``na`` if a dtype is unknown."""
    from pyprof.prof.model.registry import Estimate

    nbytes = moved(*io)
    return Estimate(flops, nbytes, params, None if nbytes is not None else "dtype unknown: bytes not modelled",
                    tc_dims)
