"""JSON pieces of a record, built without a JSONEncoder call where a plain join does (the hot path).

Every helper produces exactly what ``json.dumps(..., separators=(",", ":"))`` would, so that a line the writer
makes with every key is byte for byte ``Record.to_json()`` (a test checks it).
"""
from __future__ import annotations

import json

from pyprof.record import ATTRIBUTION, BY_NAME, FIELDS, LINE_RUNS, Field, Part

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


#: Field.json kind -> encoder (pyprof.record.FIELDS). ``json``: a value correlate keeps encoded already, or None.
ENCODERS = {
    "str": string, "str?": lambda v: "null" if v is None else string(v), "int": str, "int?": integer, "ints": ints,
    "strings": strings, "bool": lambda v: "true" if v else "false", "value": value, "nested": nested,
    "json": lambda v: "null" if v is None else v, "json_items": lambda v: "[" + ",".join(v) + "]",
}
#: The JSON of each field's default: a field not written ``always`` is left out where it encodes to this.
DEFAULT_JSON = {f.name: value(list(f.default) if type(f.default) is tuple else f.default) for f in FIELDS}


def part(fields: tuple[Field, ...], values, first: bool = False) -> str:
    """The JSON of one part of a record (pyprof.record.Part): ``"key":value`` for each field, each after a comma
    (none before the first of a line: ``first``), an omittable field left out at its default. Run once per
    distinct part, not per record."""
    out = []
    for f, v in zip(fields, values):
        text = ENCODERS[f.json](v)
        if f.always or text != DEFAULT_JSON[f.name]:
            out.append(f'"{f.name}":{text}')
    text = ",".join(out)
    return text if first or not text else "," + text


#: The runs of attribution fields on the line (split where the writer's subSeqId sits), as slices of the
#: ATTRIBUTION fields correlate hands over.
_RUNS = tuple(fields for part_, fields in LINE_RUNS if part_ is Part.ATTRIBUTION)
_SEQ_MARKER = ATTRIBUTION.index("seqMarker")


def attribution(fields: tuple | None, raw_markers: bool = False) -> tuple[str, ...]:
    """A launch's attribution parts of the line (one per run of LINE_RUNS), from the ATTRIBUTION fields of a
    LAUNCH_INFO (activities.py; ``marker`` entries, ``args`` and ``fwd`` already JSON); None for a launch
    outside every range. The raw autograd texts (``seqMarker``) are written only with ``raw_markers``."""
    if fields is None:
        fields = _EMPTY
    elif not raw_markers and fields[_SEQ_MARKER]:
        fields = fields[:_SEQ_MARKER] + ([],) + fields[_SEQ_MARKER + 1:]
    out = []
    at = 0
    for run in _RUNS:
        out.append(part(run, fields[at:at + len(run)]))
        at += len(run)
    return tuple(out)


def forward_link(mod: str, op: str, args_json: str, callsite: str | None, layer: list, seq: int) -> str:
    """The record's ``fwd`` object as JSON, its arguments already encoded."""
    return (f'{{"mod":{string(mod)},"op":{string(op)},"args":{args_json},"callsite":{nested(callsite)},'
            f'"layer":{strings(layer)},"seq":{integer(seq)}}}')


#: The attribution of a launch outside every range, in the form correlate hands the writer.
_EMPTY = tuple("[]" if BY_NAME[n].json == "json" and BY_NAME[n].default == [] else
               None if BY_NAME[n].json == "json" else
               list(BY_NAME[n].default) if isinstance(BY_NAME[n].default, (list, tuple)) else BY_NAME[n].default
               for n in ATTRIBUTION)
