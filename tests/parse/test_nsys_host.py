"""The host intervals of an nsys export read in bulk (pyprof.parse.readers.nsys_host): a range's category is decided by
one rule whether its text is inline (classified in SQL) or a registered string (classified in Python)."""
from __future__ import annotations

import sqlite3

from pyprof.parse.readers.nsys_host import CODES, category_of, category_sql

TEXTS = {
    "ProfilerStep#3": "step",
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": "dataloader",
    '{"pyprof":1,"mod":"torch.nn.functional","op":"linear","args":[]}': "op",
    '{"pyprof":1,"module":"encoder.layers.0","type":"Block"}': None,  # a module range: no op of its own
    "aten::addmm, seq = 16, op_id = 109": "op",
    "AddmmBackward0, seq = 16, op_id = 120": "op",
    "MyFnBackward, seq = 2": "op",
    "layer:conv1": None,
    "nccl:all_reduce, op_id = 7": None,
    "profilerstep#3": None,  # the prefixes are case-sensitive
    "": None,
}


def test_inline_and_registered_texts_take_one_rule():
    codes = {c: k for k, c in enumerate(CODES)}
    con = sqlite3.connect(":memory:")
    for text, expected in TEXTS.items():
        assert category_of(text) == expected, text
        (got,) = con.execute(f"SELECT {category_sql('t', codes)} FROM (SELECT ? AS t)", (text,)).fetchone()
        assert got == (None if expected is None else codes[expected]), text


def test_union_sorted_unsorted_and_broken_intervals():
    import numpy as np

    from pyprof.parse.side.host import union

    def run(starts, ends):
        lo, hi = union(np.array(starts, np.int64), np.array(ends, np.int64))
        return lo.tolist(), hi.tolist()

    # sorted already (no sort needed), touching ones joined: [0,5) [5,7) -> [0,7); [9,10) apart
    assert run([0, 5, 9], [5, 7, 10]) == ([0, 9], [7, 10])
    # the same intervals out of order, one nested: [2,3) inside [0,5)
    assert run([9, 2, 5, 0], [10, 3, 7, 5]) == ([0, 9], [7, 10])
    # an end before its start is left out
    assert run([0, 20, 30], [10, 15, 40]) == ([0, 30], [10, 40])
    assert run([5], [1]) == ([], [])


def test_a_step_by_its_text_alone(tmp_path):
    """A row with an inline text that is no step and a textId that is one is no step (the text decides, as for its
    category): the steps keep their names. Before, that row took a name too, and the names of its block, out of step
    with the steps, were all left blank."""
    from pyprof.parse.readers.nsys_host import ranges_by_category
    from pyprof.parse.readers.sqlrows import Rows

    path = tmp_path / "steps.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO StringIds VALUES (1, 'ProfilerStep#9');
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER,
            textId INTEGER);
        INSERT INTO NVTX_EVENTS VALUES (100, 900, 59, 'ProfilerStep#1', 16777217, NULL);
        INSERT INTO NVTX_EVENTS VALUES (200, 300, 59, 'layer:conv1', 16777217, 1);
        INSERT INTO NVTX_EVENTS VALUES (1000, 1900, 59, NULL, 16777217, 1);
    """)
    db.commit()
    got = ranges_by_category(Rows(db, str(path), str(path), {}), "NVTX_EVENTS", True, "e.eventType = 59")
    # globalTid 16777217 = 1 << 24 | 1: process 1
    assert {k: (s.tolist(), e.tolist(), n) for k, (s, e, n) in got.items()} == {
        (1, "step"): ([100, 1000], [900, 1900], ["ProfilerStep#1", "ProfilerStep#9"])}


def test_packed_intervals_write_the_same_host_lines():
    """Host intervals packed while parse writes the records (host.packed: 32-bit gaps and lengths) give the host
    lines the intervals themselves give, on random groups: overlapping, touching, nested, with intervals that end
    before they start, as lists (Kineto's) and arrays, single ones, gaps too long for 32 bits (kept as they came);
    steps are never merged (two back-to-back steps stay two). A merged group of n intervals holds 8n bytes packed
    (4 + 4 per interval), against 16n."""
    import numpy as np

    from pyprof.parse.side.host import Packed, lines_of, packed

    rng = np.random.default_rng(3)
    found = {}
    for pid in range(12):
        n = int(rng.integers(1, 3000))
        starts = np.cumsum(rng.integers(-50, 400, n)) + 10**18  # out of order at times, ns since the epoch
        ends = starts + rng.integers(-5, 300, n)  # some end before they start: left out by the union
        if pid == 3:
            starts[n // 2:] += 5 * 2**32  # a gap of 21 s: too long to pack
            ends[n // 2:] += 5 * 2**32
        group = (starts.tolist(), ends.tolist(), []) if pid % 2 else (starts, ends, [])
        found[(pid, ("op", "runtime", "dataloader")[pid % 3])] = group
    found[(1, "step")] = ([10, 20], [20, 30], ["ProfilerStep#1", "ProfilerStep#2"])  # touching: kept apart
    want = list(lines_of(dict(found)))
    got_groups = packed(dict(found))
    assert list(lines_of(got_groups)) == want
    kinds = {k: type(v[0]).__name__ for k, v in got_groups.items()}
    assert kinds[(3, "op")] == "ndarray" and kinds[(1, "step")] == "list"  # the long gap; the steps
    assert sum(v == "Packed" for v in kinds.values()) == 11
    p = next(v[0] for v in got_groups.values() if type(v[0]) is Packed)
    assert p.gaps_ns.nbytes + p.lengths_ns.nbytes == 8 * len(p.gaps_ns)
