"""JSON pieces of a record, built without a JSONEncoder call where a plain join does (the hot path).

Every helper produces exactly what ``json.dumps(..., separators=(",", ":"))`` would, so that the writer's
lines are byte for byte ``Record.to_json()`` (a test checks every line of every corpus file).
"""
from __future__ import annotations

import json

from pyprof.common import RECORD_SCHEMA

_ENCODER = json.JSONEncoder(separators=(",", ":"))
string = json.encoder.encode_basestring_ascii  # what the encoder itself uses for str (ensure_ascii)

# JSONEncoder.encode builds a C encoder on every call, which costs more than the small values encoded
# here; build the same one once (as JSONEncoder.iterencode does, without the circular-reference check).
if json.encoder.c_make_encoder is not None:
    # allow_nan off: a NaN or an infinity raises instead of becoming a token that is not JSON.
    _c_encoder = json.encoder.c_make_encoder(None, _ENCODER.default, string, None, ":", ",", False, False, False)

    def value(v) -> str:
        """Strict JSON of any JSON-able value: a float that is not finite is written as docs/markers.md says
        (the strings "nan", "inf", "-inf")."""
        try:
            return "".join(_c_encoder(v, 0))
        except ValueError:
            return "".join(_c_encoder(_finite(v), 0))
else:  # pragma: no cover - CPython always has the C accelerator
    def value(v) -> str:
        """Strict JSON of any JSON-able value (see above)."""
        return json.dumps(_finite(v), separators=(",", ":"), allow_nan=False)


def _finite(v):
    """``v`` with every float that is not finite replaced by its string (containers rebuilt, others as they are)."""
    if isinstance(v, float):
        return v if v - v == 0 else ("nan" if v != v else "inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def integer(v) -> str:
    """JSON of an int or None (readers give ints for every count and id)."""
    return "null" if v is None else str(v)


def ints(items) -> str:
    """JSON of a sequence of ints, None allowed (grid and block of old exports may lack a dimension)."""
    if None in items:
        return "[" + ",".join("null" if x is None else str(x) for x in items) + "]"
    return "[" + ",".join(map(str, items)) + "]" if items else "[]"


def strings(items: list) -> str:
    """JSON of a list of strings: the C string escaper per item, no encoder call."""
    return "[" + ",".join(map(string, items)) + "]" if items else "[]"


def nested(v) -> str:
    """JSON of a nested value; empty ones, the common case, without an encoder call."""
    if v is None:
        return "null"
    if v == []:
        return "[]"
    return value(v)


def attribution(fields: tuple | None) -> tuple[str, str]:
    """A launch's attribution keys of the record, before and after ``subSeqId``, from the ATTRIBUTION fields
    of a LAUNCH_INFO (model.py; ``marker`` entries, ``args`` and ``fwd`` already JSON); None for a launch
    outside every range."""
    if fields is None:
        return _EMPTY_ATTRIBUTION
    layer, trace, repr_markers, marker, seq_marker, seq_id, alt_seq_id, direction, recompute, mod, op, args, \
        outputs, callsite, fwd, ranges = fields
    return (
        f'"layer":{strings(layer)},"trace":{strings(trace)},"reprMarkers":{nested(repr_markers)},'
        f'"marker":[{",".join(marker)}],"seqMarker":{strings(seq_marker)},"seqId":{ints(seq_id)}',
        f'"altSeqId":{ints(alt_seq_id)},"dir":{string(direction)},"recompute":{"true" if recompute else "false"},'
        f'"mod":{strings(mod)},'
        f'"op":{strings(op)},"args":{args},"outputs":{nested(outputs)},"callsite":{nested(callsite)},'
        f'"fwd":{"null" if fwd is None else fwd},"ranges":{strings(ranges)},"schema":{RECORD_SCHEMA}')


def forward_link(mod: str, op: str, args_json: str, callsite: str | None, layer: list, seq: int) -> str:
    """The record's ``fwd`` object as JSON, its arguments already encoded."""
    return (f'{{"mod":{string(mod)},"op":{string(op)},"args":{args_json},"callsite":{nested(callsite)},'
            f'"layer":{strings(layer)},"seq":{integer(seq)}}}')


_EMPTY_ATTRIBUTION = (
    '"layer":[],"trace":[],"reprMarkers":[],"marker":[],"seqMarker":[],"seqId":[]',
    f'"altSeqId":[],"dir":"","recompute":false,"mod":[],"op":[],"args":[],"outputs":[],"callsite":null,"fwd":null,"ranges":[],'
    f'"schema":{RECORD_SCHEMA}')
