"""The host intervals of an nsys export read in bulk (pyprof.parse.nsys_host): a range's category is decided by
one rule whether its text is inline (classified in SQL) or a registered string (classified in Python)."""
from __future__ import annotations

import sqlite3

from pyprof.parse.nsys_host import _CODES, category_of, category_sql

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
    codes = {c: k for k, c in enumerate(_CODES)}
    con = sqlite3.connect(":memory:")
    for text, expected in TEXTS.items():
        assert category_of(text) == expected, text
        (got,) = con.execute(f"SELECT {category_sql('t', codes)} FROM (SELECT ? AS t)", (text,)).fetchone()
        assert got == (None if expected is None else codes[expected]), text


def test_union_sorted_unsorted_and_broken_intervals():
    import numpy as np

    from pyprof.parse.host import union

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
