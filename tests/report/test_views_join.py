"""The overview's note on a joined input (pyprof parse FULL --timing LIGHT, its join line: pyprof.prof.load.joined), on
the committed captures tests/parse/test_join.py joins: AdamW foreach as attribution, fused as timing pass, so the
optimizer's kernels do not pair on either side.

Expected numbers come from the joined file itself, read with plain json: the join line's counts are checked against
the records (a record whose `seqId`/`marker` attribution is missing is a timing activity without attribution), and
the percentages are the line's own ns divided by hand."""
from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest

from pyprof.common import InputError
from pyprof.parse.cli import main as parse_main
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.views import build

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def joined(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("joinview")
    dbs = []
    for name in ("transformer_foreach", "transformer_fused"):
        db = tmp / f"{name}.sqlite"
        with lzma.open(DATA / f"diff/{name}.sqlite.xz") as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
        dbs.append(db)
    out = tmp / "joined.dict"
    assert parse_main([str(dbs[0]), "--timing", str(dbs[1]), "-o", str(out)]) == 0
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _join_notes(path: Path) -> list[str]:
    return [n for n in build(aggregate_files([str(path)]), ["overview"])[0].notes if "Times from a timing pass" in n]


def test_the_overview_says_once_where_the_times_come_from(joined):
    lines = _lines(joined)
    (line,) = [d for d in lines if d.get("pyprof_side") == "join"]
    records = [d for d in lines if "pyprof_side" not in d and "pyprof_header" not in d and "pyprof_end" not in d]
    # the line's timing counts are the file's records: every record is a timing activity, paired or not
    assert line["timing_records"] == len(records)
    assert line["timing_ns"] == sum(d.get("kDuration") or 0 for d in records)
    assert 0 < line["timing_unmatched"] < line["timing_records"]  # fused's optimizer kernels: no foreach twin
    assert line["attribution_unmatched"] > 0  # foreach's: left out
    (note,) = _join_notes(joined)
    x = 100.0 * line["timing_unmatched_ns"] / line["timing_ns"]
    z = 100.0 * line["attribution_unmatched_ns"] / line["attribution_ns"]
    assert note.startswith(f"Times from a timing pass ({line['timing']}, nsys): {line['matched']} of its "
                           f"{line['timing_records']} activities paired")
    assert f"by kernel {line['names_by']}, steps by " in note
    assert f"; {x:.1f}% of its GPU time has no attribution (" in note
    assert f"{line['attribution_unmatched']} attribution records left out ({z:.1f}% of their GPU time: " in note
    for name, count in line["timing_unmatched_names"].items():
        assert f"{name} x{count}" in note


def test_no_join_line_no_note(joined, tmp_path):
    plain = tmp_path / "plain.dict"
    plain.write_text("".join(x + "\n" for x in joined.read_text().splitlines() if '"pyprof_side":"join"' not in x))
    assert _join_notes(plain) == []


def test_a_damaged_join_line_is_refused_naming_it(joined, tmp_path):
    text = joined.read_text().splitlines()
    i = next(k for k, x in enumerate(text) if '"pyprof_side":"join"' in x)
    d = json.loads(text[i])
    d["matched"] += 1  # then matched + unmatched no longer make the timing pass's records
    text[i] = json.dumps(d, separators=(",", ":"))
    bad = tmp_path / "bad.dict"
    bad.write_text("".join(x + "\n" for x in text))
    with pytest.raises(InputError, match=f"line {i + 1}: a damaged join line"):
        aggregate_files([str(bad)])


def test_the_worker_processes_path_says_the_same(joined):
    """A large records file is aggregated in worker processes (aggregate_jobs), whose chunks skip the join line:
    the input keeps it from the file's tail, and the overview's note is the one pass's."""
    from pyprof.prof.aggregate_jobs import aggregate_file_jobs

    agg, _ = aggregate_file_jobs(str(joined), str(joined), 2)
    (ov,) = build(agg, ["overview"])
    assert [n for n in ov.notes if "Times from a timing pass" in n] == _join_notes(joined)
