"""The published shapes of pyprof's output, as JSON Schema (draft 2020-12) files in this folder: parse's lines
(``record``, ``header``, ``side``, ``end``: one of them per line of a records file) and the JSON Lines rows of
every view (``views``: one definition per view, ``pyprof prof --view NAME --jsonl``).

The files are generated, not written by hand: ``python -m pyprof.schemas`` writes them from the record's
declaration (record.FIELDS: each field's JSON encoding, whether every line has it) and record.py's side-line
constants, and from the columns each view declares (its Table, built on an empty input). A test checks that the
files equal what the code generates and that every committed capture's output validates against them. Each file
carries the record layout's version (record.RECORD_SCHEMA) in its ``$id``.
"""
from __future__ import annotations

import json
from pathlib import Path

from pyprof.record import (DIST_KEYS, END_KEY, FIELDS, HEADER_KEY, HOST_CATEGORIES, LEVELS, MEMORY_COLUMNS,
                           RECORD_SCHEMA, SIDE_KEY, WINDOW_SOURCES, Part)

FOLDER = Path(__file__).resolve().parent
DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE = "https://pyprof.dev/schemas"

_INT = {"type": "integer"}
#: record.Field.json -> the JSON Schema of a value so encoded (parse.write.encode.ENCODERS says what each writes).
ENCODINGS = {
    "str": {"type": "string"},
    "str?": {"type": ["string", "null"]},
    "int": _INT,
    "int?": {"type": ["integer", "null"]},
    "ints": {"type": ["array", "null"], "items": {"type": ["integer", "null"]}},
    "strings": {"type": "array", "items": {"type": "string"}},
    "bool": {"type": "boolean"},
    "value": {},
    "nested": {"type": ["array", "null"]},
    "json": {},
    "json_items": {"type": "array"},
}
_SIMPLE = {"int": {"type": ["integer", "null"]}, "str": {"type": ["string", "null"]}}


def _doc(text: str, schema: dict) -> dict:
    return {"description": text, **schema} if text else dict(schema)


def record_schema() -> dict:
    """One GPU activity's line: every field of record.FIELDS written on a line (the header's and the derived
    ones are not), those written on every line required."""
    props = {f.name: _doc(f.doc, ENCODINGS[f.json]) for f in FIELDS if f.part not in (Part.HEADER,)}
    required = [f.name for f in FIELDS if f.always and f.part is not Part.HEADER and f.derive is None]
    return _file("record", "One GPU activity (kernel, memcpy or memset): a line of a records file (docs/record.md)",
                 {"type": "object", "properties": props, "required": required, "additionalProperties": False})


def header_schema() -> dict:
    gpu = {"type": "object", "properties": {"gpu": {"type": ["string", "null"]}, "gpu_props": {}}}
    return _file("header", "The first line of each input's run of records: the layout's version and its GPUs",
                 {"type": "object", "required": [HEADER_KEY, "schema", "gpus"],
                  "properties": {HEADER_KEY: {"const": True}, "schema": {"type": "integer"},
                                 "gpus": {"type": "object", "additionalProperties": gpu},
                                 "dist": {"type": "object",
                                          "properties": {k: _SIMPLE[v] for k, v in DIST_KEYS.items()}}}})


def end_schema() -> dict:
    return _file("end", "The last line of each input's run of records: how many records it holds",
                 {"type": "object", "required": [END_KEY, "schema", "records"], "additionalProperties": False,
                  "properties": {END_KEY: {"const": True}, "schema": {"type": "integer"},
                                 "records": {"type": "integer", "minimum": 0}}})


def side_schema() -> dict:
    """The side lines after the records: memory events, host intervals, the profiled window, the program's own
    step times (record.py's memory_line, host_line, window_line and program_line)."""
    ints = {"type": "array", "items": _INT}
    pid = {"type": ["integer", "null"]}
    memory = {"type": "object", "required": [SIDE_KEY, "pid", "device", "level", "sites"] +
              [c.name for c in MEMORY_COLUMNS],
              "properties": {SIDE_KEY: {"const": "memory"}, "pid": pid, "device": {"type": "string"},
                             "level": {"enum": list(LEVELS)}, "sites": {"type": "array"},
                             **{c.name: _doc(c.doc, {"type": "array", "items": ENCODINGS[c.json]})
                                for c in MEMORY_COLUMNS}}}
    host = {"type": "object", "required": [SIDE_KEY, "pid", "category", "start_ns", "end_ns"],
            "properties": {SIDE_KEY: {"const": "host"}, "pid": pid, "category": {"enum": list(HOST_CATEGORIES)},
                           "start_ns": ints, "end_ns": ints, "names": {"type": "array", "items": {"type": "string"}}}}
    window = {"type": "object", "required": [SIDE_KEY, "pid", "start_ns", "end_ns", "source", "launches"],
              "properties": {SIDE_KEY: {"const": "window"}, "pid": pid, "start_ns": _INT, "end_ns": _INT,
                             "source": {"enum": list(WINDOW_SOURCES)}, "launches": _INT}}
    program = {"type": "object", "required": [SIDE_KEY, "pid", "unprofiled_step_ns", "captured_step_ns", "how"],
               "properties": {SIDE_KEY: {"const": "program"}, "pid": pid, "unprofiled_step_ns": ints,
                              "captured_step_ns": ints, "how": {"type": "string"}}}
    return _file("side", "A side line of a records file: memory events, host intervals, the profiled window, or the "
                 "program's own step times", {"oneOf": [memory, host, window, program]})


def views_schema() -> dict:
    """Each view's JSON Lines row: an object of the view's columns, each a string, a number or null (what a
    Table's cells are); with several views in one output, each row carries ``view`` too. A view's columns are
    those its Table declares when built on an empty input and on two inputs of one kernel each (a column shown
    only with several workers is not required), and the stragglers table's declaration (it is built only where
    collectives were matched across ranks)."""
    import pyprof.prof  # noqa: F401  (registers the built-in formulas)
    from pyprof.prof import views
    from pyprof.prof.aggregate import aggregate
    from pyprof.prof.tables import Table
    from pyprof.prof.views.ranks import STRAGGLERS

    def kernel(pid: int) -> dict:
        return {"kind": "kernel", "kShortName": "k", "kDuration": 1, "start_ns": 0, "pid": pid, "tid": pid}

    seen: dict[str, list[Table]] = {}
    for inputs in ([("schema", [])], [("a", [kernel(1)]), ("b", [kernel(2)])]):
        for t in views.build(aggregate(inputs)):
            seen.setdefault(t.name, []).append(t)
    seen.setdefault(STRAGGLERS[0], []).append(Table.of(*STRAGGLERS))
    defs = {}
    cell = {"type": ["string", "number", "null"]}
    for name, tables in seen.items():
        headers: dict = {}
        for t in tables:
            headers.update(zip(t.columns, t.headers))
        required = [c for c in tables[0].columns if all(c in t.columns for t in tables)]
        props = {"view": {"type": "string"}, **{c: {"title": h, **cell} for c, h in headers.items()}}
        defs[name] = {"title": tables[0].title, "type": "object", "properties": props, "required": required,
                      "additionalProperties": False}
    return _file("views", "A row of a view (pyprof prof --view NAME --jsonl): see $defs, one per view (docs/views.md)",
                 {"$defs": defs, "anyOf": [{"$ref": f"#/$defs/{n}"} for n in defs]})


def _file(name: str, title: str, body: dict) -> dict:
    return {"$schema": DRAFT, "$id": f"{BASE}/{RECORD_SCHEMA}/{name}.json", "title": title, **body}


GENERATORS = {"record": record_schema, "header": header_schema, "end": end_schema, "side": side_schema,
              "views": views_schema}


def generate() -> dict[str, dict]:
    """Every schema, by file name (without .json)."""
    return {name: make() for name, make in GENERATORS.items()}


def text(schema: dict) -> str:
    """A schema file's text, as written to the folder."""
    return json.dumps(schema, indent=1, sort_keys=False) + "\n"


def load(name: str) -> dict:
    """The published schema ``name`` (record, header, side, end, views)."""
    return json.loads((FOLDER / f"{name}.json").read_text(encoding="utf-8"))
