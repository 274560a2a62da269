"""Issue 40 item 9: the fuzz bench's records seeds are whole streams. A seeds folder reused between runs
(``bench/fuzz_run.py --seeds-dir``) kept any records file it found, and two cut streams there (no end line) made
every records mutation of them a cut stream that its label did not say. A kept seed that is not a whole stream
of this schema is made again; a records seed without its end line is refused by the mutations."""
from __future__ import annotations

import random

import pytest

from robust_helpers import DATA

from bench.fuzz import records_mut
from bench.fuzz.seeds import Seeds, prepare, whole_stream
from pyprof.record import END_PREFIX

TRACE = DATA / "kineto" / "custom_module.pt.trace.json.gz"
NAME = "custom_module.pt.trace.json"


def _prepare(folder):
    return prepare(folder, log=lambda m: None, nsys=[], nvprof=[], kineto=[TRACE], records_from=(NAME,),
                   not_profiles=[])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The seed's records as parse makes them, once."""
    folder = tmp_path_factory.mktemp("seeds")
    seeds = _prepare(folder)
    assert not seeds.skipped and len(seeds.records) == 1
    return seeds.records[0].read_bytes()


def _lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


@pytest.mark.parametrize("damage", ["end line dropped", "last record cut", "older schema"])
def test_a_kept_seed_that_is_no_whole_stream_is_made_again(tmp_path, made, damage):
    lines = _lines(made)
    assert lines[-1].startswith(END_PREFIX)
    if damage == "end line dropped":
        kept = lines[:-1]
    elif damage == "last record cut":
        kept = lines[:-2] + [lines[-2][:40]]
    else:
        kept = [lines[0].replace(b'"schema":4', b'"schema":3', 1)] + lines[1:]
    records = tmp_path / f"{NAME}.dict"
    records.write_bytes(b"\n".join(kept) + b"\n")
    assert whole_stream(records) is not None
    seeds = _prepare(tmp_path)
    assert seeds.records == [records] and records.read_bytes() == made


def test_a_whole_kept_seed_is_kept(tmp_path, made):
    """The silent side: a whole stream of this schema is not parsed again (its file is the same one)."""
    records = tmp_path / f"{NAME}.dict"
    records.write_bytes(made)
    before = records.stat().st_ino, records.stat().st_mtime_ns
    _prepare(tmp_path)
    assert (records.stat().st_ino, records.stat().st_mtime_ns) == before


def test_the_mutations_refuse_a_records_seed_without_its_end_line(tmp_path, made):
    cut = tmp_path / "cut.dict"
    cut.write_bytes(b"\n".join(_lines(made)[:-1]) + b"\n")
    with pytest.raises(ValueError, match="lacks parse's end line"):
        records_mut.lines(random.Random(0), Seeds(tmp_path, records=[cut]))
    # the original PyProf's dict lines have no end line: a legacy seed is taken as it is
    legacy = tmp_path / "old.legacy"
    legacy.write_text("{'kShortName': 'k', 'kDuration': 5}\n")
    src, ls = records_mut.lines(random.Random(0), Seeds(tmp_path, legacy=[legacy]), legacy=True)
    assert src == legacy and len(ls) == 1
