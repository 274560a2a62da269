"""Decoding of range texts: what a push/pop range says about the op, layer or call site that opened it.

Five dialects are understood (docs/parse.md):

* pyprof's own JSON payload, version 1 (docs/markers.md): op ranges and module ranges;
* a range's name with the JSON payload Nsight Systems exported for it (the nsys reader joins the two, see
  :func:`payload_text`): the shapes and dtypes of ``--pytorch=functions-trace-shapes``;
* ``layer:NAME`` ranges, from ``pyprof.layer`` or written by hand;
* PyTorch ``emit_nvtx`` texts, ``name, seq = N, op_id = M, sizes = [[..]], input_op_ids = [..]``, every
  suffix optional and read by field name (the original PyProf crashed on a suffix it did not expect);
* legacy NVIDIA PyProf / apex.pyprof Python-literal dicts, read with ``ast.literal_eval`` (never ``eval``).

Anything else is a plain user range: kept in the record's range stack, otherwise ignored.
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any, Callable

from pyprof.common import BoundedDict
from pyprof.parse.write import encode
from pyprof.record import INT_MAX, INT_MIN

# Marker kinds.
OP = "op"  # names a call: pyprof JSON op range, or a legacy {'mod','op','args'} dict
MODULE = "module"  # pyprof nn.Module range: contributes its qualified name to the layer list
LAYER = "layer"  # layer:NAME
TRACE = "trace"  # legacy {'traceMarker': [...]}
REPR = "repr"  # legacy {'mod': ..., 'strRepr': ...}
SEQ = "seq"  # PyTorch autograd / emit_nvtx range (forward aten op or backward node)

#: Ops whose output shape their tensor inputs do not tell without the non-tensor arguments (stride, padding,
#: kernel size, output size) that emit_nvtx and PyTorch 1.8/1.9 traces do not record: parse finds the shape
#: elsewhere for these (correlate.OUTPUT_WAIT_NS, kineto.KinetoSource).
OUTPUT_OPS = re.compile(r"conv|pool|upsample|interpolate|im2col|col2im|unfold")

_EMIT_FIELD = re.compile(r",\s*(seq|op_id|sizes|input_op_ids|stashed seq)\s*=\s*")
# Autograd node names: "AddmmBackward0", a Python Function's "MyFnBackward", "CompiledFunctionBackward", a C++
# custom Function's "torch::autograd::CppNode<SplitLookupFunction_...>" (no Backward suffix: TorchRec), and the
# engine's own nodes in torch::autograd (AccumulateGrad, CopySlices, GraphRoot). Ranges named so are backward work,
# whatever sequence number they carry: the forward op with the same number is elsewhere.
_BACKWARD_NAME = re.compile(r"Backward\d*$|^torch::autograd::|CppNode<")
_COMPILED_CONTAINERS = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")
_KINETO_BACKWARD_PREFIX = ENGINE_PREFIX = "autograd::engine::evaluate_function: "

# Texts that repeat (pyprof's registered strings, layer names) are decoded once; emit_nvtx texts are
# nearly all distinct (op_id), so caching them would only grow memory.
_CACHE_MAX = 200_000
_cache = BoundedDict(_CACHE_MAX)  # text -> Marker or None
_sizes_json = BoundedDict(_CACHE_MAX)  # an emit_nvtx sizes text -> the JSON of its arguments (Marker.args_json)


class Marker:
    """What one range text says. ``kind`` is one of the module constants; other attributes as they apply.

    ``args`` is a list of argument entries in the shape of docs/markers.md; for emit_nvtx and Kineto
    markers it is built lazily from ``sizes`` (and ``dtypes`` / ``concrete``) by :meth:`get_args`.
    """

    __slots__ = ("kind", "name", "mod", "op", "args", "site", "stack", "seq", "stashed", "op_id",
                 "raw_sizes", "raw_inputs", "outputs", "dtypes", "concrete", "backward", "data", "fwd_tid",
                 "container", "_args_json", "_lean_json")

    def __init__(self, kind: str, name: str = "", mod: str = "", op: str = ""):  # noqa: D107
        self.kind = kind
        self.name = name
        self.mod = mod
        self.op = op
        self.args: list | None = None
        self.site: str | None = None
        self.stack: list | None = None
        self.seq: int | None = None
        self.stashed: int | None = None
        self.op_id: int | None = None
        self.raw_sizes: Any = None  # emit_nvtx: the text after "sizes = "; Kineto: the Input Dims list
        self.raw_inputs: str | None = None  # emit_nvtx: the text after "input_op_ids = " (producer, output) pairs
        self.outputs: list | None = None  # output shapes a reader knows (Kineto: from the op's backward node)
        self.dtypes: list | None = None
        self.concrete: list | None = None
        self.backward = False
        # A range that holds ops and is not one: a torch.compile region (see _split_name), or a record_function
        # range such as "Optimizer.step#SGD.step, op_id = 3" (no namespace, no sequence number; see _unnumbered).
        self.container = False
        self.data: dict | None = None  # the decoded dict, as written (pyprof JSON / legacy)
        self.fwd_tid: int | None = None
        self._args_json: str | None = None
        self._lean_json: str | None = None

    def get_args(self) -> list:
        """Return the decoded argument entries of this op marker (empty when nothing is known)."""
        if self.args is None:
            self.args = _args_from_sizes(self.raw_sizes, self.dtypes, self.concrete)
        return self.args

    def args_json(self) -> str:
        """The JSON of :meth:`get_args`, encoded once: a marker text repeats every step (its Marker is cached),
        and an optimizer's foreach call lists every parameter tensor."""
        if self._args_json is None:
            sizes = self.raw_sizes
            if self.args is None and type(sizes) is str and self.dtypes is None and self.concrete is None:
                # emit_nvtx: the same sizes text comes back every step on ranges that are all distinct (op_id)
                self._args_json = _sizes_json.get(sizes)
                if self._args_json is None:
                    self._args_json = encode.value(_args_from_sizes(sizes, None, None))
                    _sizes_json.add(sizes, self._args_json)
            else:
                self._args_json = encode.value(self.get_args())
        return self._args_json

    def lean_json(self, call: int | None) -> str:
        """The JSON of this op marker's dict without its arguments (they are the record's ``args``), with
        ``"call": call`` last when given: the record's ``marker`` entry. The common part is encoded once."""
        if self._lean_json is None:
            self._lean_json = encode.value({k: v for k, v in (self.data or {}).items() if k != "args"})
        if call is None:
            return self._lean_json
        if "call" in (self.data or {}):  # a marker text with its own "call": the payload's value replaces it
            lean = {k: v for k, v in self.data.items() if k != "args"}
            lean["call"] = call
            return encode.value(lean)
        if self._lean_json == "{}":
            return f'{{"call":{encode.value(call)}}}'
        return f'{self._lean_json[:-1]},"call":{encode.value(call)}}}'


def decode(text: str | None) -> Marker | None:
    """Return the Marker for a range text, or None for a plain user range (or no text)."""
    if not text:
        return None
    if text[0] == "{":
        hit = _cache.get(text, _cache)
        if hit is not _cache:
            return hit  # type: ignore[return-value]
        marker = _decode_dict(text)
        _cache.add(text, marker)
        return marker
    if text.startswith("layer:"):
        return Marker(LAYER, text[6:])
    if "=" in text:
        return _decode_emit_nvtx(text)
    if text.startswith("torch.nn."):  # Nsight Systems' --pytorch=functions-trace: Python functions by name
        return _python_function(text)
    if text.startswith("triton_"):  # Inductor's range around each generated kernel of a compiled graph
        return Marker(SEQ, text, "triton", by_kernel_name(text))
    if _BACKWARD_NAME.search(text):  # Kineto / old emit_nvtx backward node without any suffix
        m = Marker(SEQ, text, "autograd", text)
        m.backward = True
        return m
    return None


_NN_FUNCTIONAL = "torch.nn.functional."
_NN_MODULE_FORWARD = re.compile(r"^torch\.nn\.modules\.(\w+)\.forward$")


def _python_function(text: str) -> Marker | None:
    """A range of Nsight Systems' ``--pytorch=functions-trace`` (a Python function of its PyTorch list, named by
    its qualified name): ``torch.nn.functional.linear`` is an op, as a pyprof op range without arguments;
    ``torch.nn.modules.Linear.forward`` a module, named by its class (the trace has no instance names);
    anything else (``torch.nn.modules.Module.__call__``) a plain range."""
    if text.startswith(_NN_FUNCTIONAL):
        op = text[len(_NN_FUNCTIONAL):]
        return Marker(OP, text, "torch.nn.functional", op) if op.isidentifier() else None
    m = _NN_MODULE_FORWARD.match(text)
    if m is not None and m.group(1) != "Module":
        return Marker(MODULE, m.group(1))
    return None


#: Marker texts nest a few levels (an op's arguments, a tensor list's items); deeper ones are not markers.
MAX_MARKER_DEPTH = 16
#: Longer texts are not decoded: a marker of the longest foreach call (every parameter of a model) is far shorter.
MAX_MARKER_CHARS = 4 << 20


def _literal(text: str):
    """ast.literal_eval, without the SyntaxWarning an odd escape in a string prints to stderr (Python 3.12)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def _non_finite(name: str) -> str:
    """NaN, Infinity and -Infinity, which JSON has no numbers for, as docs/markers.md writes them: strings."""
    return {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[name]


def _finite_float(text: str):
    v = float(text)
    return v if v - v == 0 else ("nan" if v != v else "inf" if v > 0 else "-inf")  # 1e999 is inf


def _decode_dict(text: str) -> Marker | None:
    if len(text) > MAX_MARKER_CHARS:
        return None
    parts = split_args(text) if split_args is not None and len(text) >= SPLIT_MIN_CHARS else None
    split = _decode_split(*parts) if parts is not None else None
    if split is not None:
        data, args_json = split
    else:
        args_json = None
        try:
            data = json.loads(text, parse_constant=_non_finite, parse_float=_finite_float)
        except RecursionError:
            return None
        except ValueError:
            try:
                # Legacy PyProf wrote Python reprs (single quotes, tuples): literal_eval parses them safely.
                data = _literal(text)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
        if not isinstance(data, dict) or nests_deeper(data, MAX_MARKER_DEPTH):
            return None
    if PAYLOAD_KEY in data:
        return _with_payload(data)
    if "pyprof" in data:
        if "module" in data:
            m = Marker(MODULE, str(data["module"]), op=str(data.get("type", "")))
            m.data = data
            return m
        if "op" in data:
            m = Marker(OP, str(data["op"]), str(data.get("mod", "")), str(data["op"]))
            args = data.get("args")
            m.args = args if isinstance(args, list) else []
            m._args_json = args_json
            site = data.get("site")
            m.site = None if site is None else str(site)
            stack = data.get("stack")
            m.stack = [str(x) for x in stack] if isinstance(stack, list) else None
            m.data = data
            return m
        return None
    if "traceMarker" in data:
        m = Marker(TRACE)
        tm = data["traceMarker"]
        m.stack = [str(x) for x in tm] if isinstance(tm, (list, tuple)) else [str(tm)]
        m.data = data
        return m
    if "strRepr" in data:
        m = Marker(REPR, str(data.get("mod", "")), str(data.get("mod", "")))
        m.data = data
        return m
    if "op" in data:
        m = Marker(OP, str(data["op"]), str(data.get("mod", "")), str(data["op"]))
        m.args = [_legacy_arg(a) for a in data.get("args", []) or []]
        m.data = _jsonable(data)
        return m
    return None


#: The key under which the nsys reader puts a range's exported JSON payload beside its name (payload_text).
PAYLOAD_KEY = "nsysPayload"
#: A payload's names for its arguments' shapes and dtypes. NVIDIA documents where nsys exports a range's decoded
#: payload (NVTX_EVENTS.jsonText, or jsonTextId into StringIds) but not the field names functions-trace-shapes
#: writes: these are the names PyTorch gives the same data (emit_nvtx's ``sizes``, the profiler's ``Input Dims``
#: and ``Input type``) and their plain spellings. The first one present is read.
PAYLOAD_SHAPES = ("sizes", "shapes", "input_shapes", "Input Dims")
PAYLOAD_DTYPES = ("dtypes", "input_dtypes", "Input type")


def payload_text(name: str | None, payload: str) -> str | None:
    """The text of a range whose export holds a JSON payload: the name and the payload in one JSON object when the
    name is an op's or an autograd range's and the payload names argument shapes (decode reads it as the name's
    marker with those arguments), else the name (a user's range stays one, whatever its payload)."""
    if not name or name[0] == "{" or len(payload) > MAX_MARKER_CHARS or '"' not in payload:
        return name
    m = decode(name)
    if m is None or m.kind not in (OP, SEQ):
        return name
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return name
    if not isinstance(data, dict) or not any(k in data for k in PAYLOAD_SHAPES):
        return name
    return f'{{"{PAYLOAD_KEY}":{payload},"name":{json.dumps(name)}}}'


def _with_payload(data: dict) -> Marker | None:
    """The marker of the payload's range name (an op or an autograd range; anything else is what its name says)
    with the payload's shapes and dtypes as its arguments."""
    name, payload = data.get("name"), data.get(PAYLOAD_KEY)
    m = decode(name) if isinstance(name, str) and name[:1] != "{" else None
    if m is None or m.kind not in (OP, SEQ) or not isinstance(payload, dict):
        return m
    shapes = next((payload[k] for k in PAYLOAD_SHAPES if k in payload), None)
    dtypes = next((payload[k] for k in PAYLOAD_DTYPES if k in payload), None)
    if isinstance(shapes, list):
        m.args = None  # built from the shapes by get_args
        m.raw_sizes = shapes
        # torch writes dtypes as "torch.float32"; records name them as torch's dtype attributes do ("float32")
        m.dtypes = [d[6:] if isinstance(d, str) and d.startswith("torch.") else d for d in dtypes] \
            if isinstance(dtypes, list) else None
    return m


def _deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists, tuples, dicts or sets more than ``limit`` deep (walked level by level, not
    recursively: the input decides the depth)."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [x for v in level for x in (v.values() if isinstance(v, dict) else v)
                 if isinstance(x, (list, tuple, dict, set, frozenset))]
    return False


#: A JSON marker text at least this long has its "args" list split where the compiled core is built (native installs
#: split_args): each element text decoded once (_arg_parts). Op markers are a few hundred characters and repeat
#: whole; an optimizer's foreach marker is thousands (every parameter, in three or four lists), a new text every
#: step for its scalars, with the same lists.
SPLIT_MIN_CHARS = 2048
#: How _decode_dict splits a long marker text: None (the reference: the whole text decoded at once), or where the
#: compiled core is built, _core.split_args (installed by pyprof.parse.write.native; a test compares the two ways):
#: the text with its "args" list emptied and the list's element texts, or None where the text is not split.
split_args: Callable[[str], tuple[str, tuple[str, ...]] | None] | None = None
_arg_parts = BoundedDict(1024)  # an element text of a split "args" list -> (its value, its JSON, nests too deep)


def _decode_split(skeleton: str, elements: tuple[str, ...]) -> tuple[dict, str] | None:
    """The dict json.loads makes of the whole text, and the JSON of its "args" list (Marker.args_json); None where a
    piece is not JSON or the dict is no marker (too deep), and the whole text decides (the same answer, or a legacy
    Python literal). json.loads of the pieces is json.loads of the whole: the "args" key is the only one of its
    name (split_args), and each element is a complete value of its own. An element is shared by the markers that
    list it: markers are read, never changed."""
    try:
        data = json.loads(skeleton, parse_constant=_non_finite, parse_float=_finite_float)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or nests_deeper(data, MAX_MARKER_DEPTH):
        return None
    values, jsons = [], []
    for e in elements:
        known = _arg_parts.get(e)
        if known is None:
            try:
                v = json.loads(e, parse_constant=_non_finite, parse_float=_finite_float)
            except (ValueError, RecursionError):
                return None
            # an element is two levels down: the dict, then its "args" list (_deeper_than counts levels so)
            deep = isinstance(v, (list, dict)) and nests_deeper(v, MAX_MARKER_DEPTH - 2)
            known = (v, encode.value(v), deep)
            _arg_parts.add(e, known)
        if known[2]:
            return None
        values.append(known[0])
        jsons.append(known[1])
    data["args"] = values
    return data, f"[{','.join(jsons)}]"


#: How _decode_dict checks a JSON marker's nesting: _deeper_than, or where the compiled core is built, the same walk
#: in C (pyprof.parse.write.native installs native.deeper_than here, which defers to _deeper_than when parse runs
#: without the core; a test compares the two).
nests_deeper = _deeper_than


def _legacy_arg(a: Any) -> dict:
    """Map one legacy PyProf argument dict to the docs/markers.md entry shape."""
    if not isinstance(a, dict):
        return {"type": type(a).__name__, "value": _jsonable(a)}
    out = {k: _jsonable(v) for k, v in a.items() if k != "name" or v}
    if out.get("type") == "tensor" and "shape" in out:
        out["shape"] = list(out["shape"])
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


_EMIT_COMMON = re.compile(r"([^,]*)(?:, seq = (\d+))?(?:, op_id = (\d+))?(?:, sizes = (.*?))?(?:, input_op_ids = (.*))?\Z",
                          re.S)
_EMIT_KEYS = {", seq = ": "seq", ", op_id = ": "op_id", ", sizes = ": "sizes", ", input_op_ids = ": "input_op_ids",
              ", stashed seq = ": "stashed seq"}


def _decode_emit_nvtx(text: str) -> Marker | None:
    # The common case, "aten::add, seq = 5, op_id = 9[, sizes = [..]][, input_op_ids = [...]]", in one regex match
    # (C speed: this runs for every range that encloses a launch, and their texts are all distinct). Every field
    # name holds " = ": where the sizes or inputs hold none, the field search below would split the text the same.
    hit = _EMIT_COMMON.match(text)
    if hit is not None and (hit.group(2) or hit.group(3)):
        seq, op_id, sizes, inputs = hit.groups()[1:]
        if (sizes is None or " = " not in sizes) and (inputs is None or " = " not in inputs):
            m = Marker(SEQ)
            m.seq = _number(seq) if seq else None
            m.op_id = _number(op_id) if op_id else None
            if sizes is not None:
                m.raw_sizes = sizes.strip()
                if inputs is not None:
                    m.raw_inputs = inputs.strip()
            _name_op(m, hit.group(1))
            _unnumbered(m)
            return m
    # Fields located with str.find on the known keys (C speed); a regex only for odd spacing ("seq=3").
    found = sorted((i, len(key), name) for key, name in _EMIT_KEYS.items() if (i := text.find(key)) >= 0)
    if not found:
        found = [(f.start(), f.end() - f.start(), f.group(1)) for f in _EMIT_FIELD.finditer(text)]
        if not found:
            return None
    m = Marker(SEQ, text[: found[0][0]])
    for n, (i, width, name) in enumerate(found):
        end = found[n + 1][0] if n + 1 < len(found) else len(text)
        _set_field(m, name, text[i + width: end].strip())
    _name_op(m, m.name)
    _unnumbered(m)
    return m


def _unnumbered(m: Marker) -> None:
    """An op name without a namespace and without a sequence number is a user's or a library's record_function
    range (``Optimizer.step#SGD.step``, ``record_param_comms``), not an op: the ops inside it name its kernels.
    (A custom autograd Function's forward has no namespace either, but it has a sequence number.)"""
    if m.seq is None and not m.mod and not m.backward:
        m.container = True


def _set_field(m: Marker, name: str, value: str) -> None:
    if name == "sizes":
        m.raw_sizes = value  # parsed only if the op's arguments are ever needed
        return
    if name == "input_op_ids":
        m.raw_inputs = value  # parsed only when an op waits for its output's shape (OUTPUT_OPS)
        return
    num = _number(value)
    if num is None:
        return
    if name == "seq":
        m.seq = num
    elif name == "op_id":
        m.op_id = num
    else:
        m.stashed = num


def quick_seq(text: str, backward: bool = False) -> int | None:
    """The ``seq = N`` of an emit_nvtx forward-op text without decoding it (None if absent or, unless
    ``backward``, a backward node). Runs on every range, hence plain string searches."""
    i = text.find(", seq = ")
    if i < 0:
        return None
    if not backward and is_backward_text(text, i):
        return None
    j = text.find(",", i + 8)
    return _number(text[i + 8: j if j >= 0 else len(text)])


def _number(text: str) -> int | None:
    """A sequence number or op id of an emit_nvtx text: ``int(text)``, or None for a text that is no integer or
    one a record cannot hold (record.INT_MIN to INT_MAX: it becomes seqId), as if the field were absent."""
    try:
        v = int(text)
    except ValueError:
        return None
    return v if INT_MIN <= v <= INT_MAX else None


def is_backward_text(text: str, end: int | None = None) -> bool:
    """True when the name in ``text[:end]`` (by default the text up to its first ``, `` field) is an autograd node
    or the engine's range around one (plain string tests first: this runs on every range with a ``seq``)."""
    if end is None:
        end = text.find(", ")
        if end < 0:
            end = len(text)
    head = text[:end]
    if "Backward" not in head and "autograd::" not in head and "CppNode<" not in head:
        return False
    return text.startswith(_KINETO_BACKWARD_PREFIX) or _BACKWARD_NAME.search(text, 0, end) is not None


INPUT_PAIR = re.compile(r"\((\d+),\s*(-?\d+)\)")  # "(op_id,output)" in input_op_ids


def input_shapes(m: Marker) -> list[tuple[int, int, list]]:
    """``(producer op_id, its output number, shape)`` for each tensor input of an emit_nvtx op with sizes and
    input_op_ids: PyTorch numbers every op (op_id) and names which op produced each input, so a consumer tells
    the shape of a producer's output, which emit_nvtx records nowhere else."""
    if not m.raw_inputs or not isinstance(m.raw_sizes, str):
        return []
    try:
        sizes = json.loads(m.raw_sizes)
    except ValueError:
        return []
    if not isinstance(sizes, list):
        return []
    out = []
    for (producer, number), shape in zip(INPUT_PAIR.findall(m.raw_inputs), sizes):
        if producer != "0" and isinstance(shape, list) and shape:
            out.append((int(producer), int(number), shape))
    return out


def _name_op(m: Marker, name: str) -> None:
    """Split an aten / autograd name into mod and op, and flag backward nodes."""
    parts = _names.get(name)
    if parts is None:
        parts = _split_name(name)
        _names.add(name, parts)
    m.name, m.mod, m.op, m.backward, m.container = parts


_names = BoundedDict(_CACHE_MAX)  # op names repeat (aten::addmm), texts do not (op_id): split each name once


def _split_name(name: str) -> tuple:
    backward = False
    if name.startswith(_KINETO_BACKWARD_PREFIX):
        name = name[len(_KINETO_BACKWARD_PREFIX):]
        backward = True
    # torch.compile's ranges around a compiled graph and its call: they enclose the graph's own ops
    # (aten::addmm of an extern GEMM, triton_* kernels), which name a kernel better than the region does.
    container = name.startswith(_COMPILED_CONTAINERS)
    if _BACKWARD_NAME.search(name):
        return name, "autograd", name, True, container
    mod, sep, op = name.rpartition("::")
    if not sep and name.startswith("triton_"):  # Inductor's range around one generated kernel: an op of its graph
        return name, "triton", by_kernel_name(name), backward, container
    return (name, mod, op, backward, container) if sep else (name, "", name, backward, container)


# triton_{pointwise, reduction, persistent reduction, template, foreach...}_<what it fuses>_<number>
_INDUCTOR_KERNEL = re.compile(r"^triton_[a-z]{3}_(.+?)(?:_\d+)?$")
BY_NAME = " (kernel name)"


def by_kernel_name(name: str) -> str:
    """The op of a kernel Inductor generated, in a trace made without pyprof.init(): what its name says it fuses
    (``triton_poi_fused_add_mul_0`` -> ``fused_add_mul (kernel name)``), labelled as read from the name, which
    Inductor shortens and which gives no shapes. pyprof.init() names the aten ops themselves (docs/markers.md)."""
    m = _INDUCTOR_KERNEL.match(name)
    return (m.group(1) if m else name) + BY_NAME


def seq_marker(name: str, seq: int | None, dims: list | None, dtypes: list | None,
               concrete: list | None, fwd_tid: int | None = None) -> Marker:
    """Return a SEQ marker built from structured fields (Kineto ``cpu_op`` events)."""
    m = Marker(SEQ, name)
    m.seq = seq
    m.raw_sizes = dims
    m.dtypes = dtypes
    m.concrete = concrete
    m.fwd_tid = fwd_tid
    _name_op(m, name)
    _unnumbered(m)
    return m


# Kineto writes C++ type names; map the common ones to torch dtype names (as pyprof markers use).
_KINETO_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
    "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128", "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
}


def _is_shape(v: Any) -> bool:
    return type(v) is list and all(type(d) is int for d in v)


def _args_from_sizes(raw_sizes: Any, dtypes: list | None, concrete: list | None) -> list:
    if raw_sizes is None:
        return []
    sizes = raw_sizes
    if isinstance(raw_sizes, str):
        try:
            sizes = json.loads(raw_sizes)
        except (ValueError, RecursionError):
            return []
    if not isinstance(sizes, list):
        return []
    args = []
    for i, shape in enumerate(sizes):
        dtype = dtypes[i] if dtypes is not None and i < len(dtypes) else None
        dtype = dtype if type(dtype) is str else None
        value = concrete[i] if concrete is not None and i < len(concrete) else ""
        if _is_shape(shape) and (shape or (dtype in _KINETO_DTYPES)):
            # A dtype the export does not record (emit_nvtx) is left out, not written as null: an emit_nvtx
            # record holds a dozen tensors, and readers take a missing dtype as unknown (docs/markers.md).
            dtype = _KINETO_DTYPES.get(dtype, dtype)
            args.append({"type": "tensor", "shape": shape, "dtype": dtype} if dtype is not None else
                        {"type": "tensor", "shape": shape})
        elif type(shape) is list and shape and all(_is_shape(x) for x in shape):
            # A list of shapes is a list of tensors (a foreach op's arguments); their dtype is not recorded.
            args.append({"type": "tensorlist", "items": [{"type": "tensor", "shape": x} for x in shape]})
        elif dtype == "TensorList" and isinstance(shape, list):
            args.append({"type": "tensorlist", "items": []})
        elif value not in ("", None) and type(value) in (str, int, float, bool):
            args.append(_scalar_entry(dtype, value))
        elif dtype:
            args.append({"type": "none" if dtype == "" else str(dtype)})
        else:
            # emit_nvtx writes [] for every non-tensor argument (and 0-dim tensors): its type is unknown.
            args.append({"type": "unknown"})
    return args


#: A scalar argument's text longer than this is kept as text, cut (a real one is a number or a short tuple).
MAX_SCALAR_CHARS = 1024


def _scalar_entry(dtype: str | None, value) -> dict:
    if type(value) is not str:
        v = value
    elif len(value) > MAX_SCALAR_CHARS:
        return {"type": "str", "value": value[:MAX_SCALAR_CHARS] + "..."}
    else:
        try:
            v = _literal(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            v = value
    if isinstance(v, bool):
        return {"type": "bool", "value": v}
    if isinstance(v, int):
        return {"type": "int", "value": v}
    if isinstance(v, float):
        return {"type": "float", "value": _jsonable(v)}
    if isinstance(v, (list, tuple)):
        return {"type": "tuple", "value": _jsonable(v)}
    return {"type": "str" if dtype in (None, "", "std::string", "String") else str(dtype), "value": str(v)}
