"""Issue 45: the published JSON Schemas (pyprof/schemas) are what the code declares, and every committed
capture's output validates against them: parse's lines (record, header, side, end) and every view's JSON Lines
rows. The two 50,000-kernel speed captures (tests/data/speed) are left out: they are the transformer example's
run, 226 steps of it, which tests/data/nsys/pyprof/transformer covers."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from pyprof import schemas  # noqa: E402
from pyprof.parse import parse_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted(p for p in [*ROOT.glob("tests/data/**/*.sqlite.xz"), *ROOT.glob("tests/data/**/*.json.gz"),
                              *ROOT.glob("examples/profiles/*.sqlite.xz")] if "speed" not in p.parts)


def test_the_files_are_what_the_code_declares():
    made = schemas.generate()
    assert sorted(made) == sorted(p.stem for p in schemas.FOLDER.glob("*.json"))
    for name, schema in made.items():
        assert (schemas.FOLDER / f"{name}.json").read_text(encoding="utf-8") == schemas.text(schema), \
            f"{name}.json differs from the code: run python -m pyprof.schemas"
        jsonschema.Draft202012Validator.check_schema(schema)
    # and they say something: a duration that is text, a field nobody declared, a view row without its columns
    record = jsonschema.Draft202012Validator(made["record"])
    good = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": 5, "start_ns": 1, "pid": 1, "tid": 1,
            "device": 0, "stream": 7, "correlation_id": 3, "grid": [1, 1, 1], "block": [32, 1, 1], "layer": [],
            "trace": [], "reprMarkers": [], "marker": [], "seqMarker": [], "seqId": [], "subSeqId": 0,
            "call_id": None, "altSeqId": [], "dir": "", "mod": [], "op": []}
    assert record.is_valid(good)
    assert not record.is_valid({**good, "kDuration": "5"}) and not record.is_valid({**good, "surprise": 1})
    assert not record.is_valid({k: v for k, v in good.items() if k != "kShortName"})
    row = jsonschema.Draft202012Validator({"$schema": schemas.DRAFT, **made["views"]["$defs"]["operators"]})
    assert not row.is_valid({"op": "linear"})


def _kind(d: dict) -> str:
    return "header" if "pyprof_header" in d else "end" if "pyprof_end" in d else \
        "side" if "pyprof_side" in d else "record"


def _shape(d: dict) -> tuple:
    """What decides whether a line validates: its keys, each value's type, and the types inside its lists."""
    return tuple((k, type(v).__name__, frozenset(type(x).__name__ for x in v) if type(v) is list else None)
                 for k, v in d.items())


def test_every_committed_captures_lines_and_view_rows_validate(tmp_path):
    import pyprof.prof  # noqa: F401
    from pyprof.prof import views
    from pyprof.prof.aggregate import aggregate, numbered_file
    from pyprof.prof.terminal import print_tables

    assert len(CAPTURES) >= 50
    lines = {k: jsonschema.Draft202012Validator(schemas.load(k)) for k in ("record", "header", "side", "end")}
    view_schema = schemas.load("views")
    rows_of = {n: jsonschema.Draft202012Validator({"$schema": schemas.DRAFT, **d})
               for n, d in view_schema["$defs"].items()}
    counts: dict = {}
    seen: set = set()
    bad = []
    for capture in CAPTURES:
        records = tmp_path / "r.dict"
        with open(records, "w", encoding="utf-8") as out:
            parse_file(str(capture), out)
        with open(records, "rb") as f:
            for n, line in enumerate(f, 1):
                d = json.loads(line)
                kind = _kind(d)
                counts[kind] = counts.get(kind, 0) + 1
                shape = _shape(d)
                if shape in seen:  # a line of the same keys and value types validated already
                    continue
                seen.add(shape)
                err = jsonschema.exceptions.best_match(lines[kind].iter_errors(d))
                if err is not None:
                    bad.append(f"{capture.name}:{n} ({kind}): {err.message[:200]}")
        text = io.StringIO()
        agg = aggregate([(capture.name, numbered_file(str(records), str(capture)))])
        print_tables(views.build(agg), text, None, "jsonl")
        for row in map(json.loads, text.getvalue().splitlines()):
            counts["view rows"] = counts.get("view rows", 0) + 1
            check = rows_of.get(row.get("view"))
            err = None if check is None else jsonschema.exceptions.best_match(check.iter_errors(row))
            if check is None or err is not None:
                bad.append(f"{capture.name}: view {row.get('view')}: {err.message[:200] if err else 'no schema'}")
        os.remove(records)
    assert bad == []
    # one header and one end line per capture, and the records and rows were there to check
    assert counts["header"] == counts["end"] == len(CAPTURES)
    assert counts["record"] > 30_000 and counts["side"] > 100 and counts["view rows"] > 10_000
