"""pyprof.common's BoundedDict: the one eviction policy of every cache and window of the stages."""
from __future__ import annotations

from pyprof.common import BoundedDict


def test_an_add_past_the_bound_drops_the_oldest_half_at_once():
    d = BoundedDict(4)
    for k in "abcd":
        d.add(k, k.upper())
    assert list(d) == ["a", "b", "c", "d"]  # at the bound: nothing dropped
    d.add("e", "E")  # 5 > 4: the oldest 4 // 2 = 2 go
    assert list(d) == ["c", "d", "e"]
    d.add("f", "F")
    d.add("g", "G")  # 5 again: c and d go
    assert list(d) == ["e", "f", "g"]


def test_setting_a_key_again_keeps_its_place():
    """Age is the first add: a counter updated in place (parse's kernels per op call) is as old as its call."""
    d = BoundedDict(4)
    for k in "abcd":
        d.add(k, 0)
    d.add("a", 1)  # present: no growth, no eviction, still the oldest
    assert list(d.items()) == [("a", 1), ("b", 0), ("c", 0), ("d", 0)]
    d.add("e", 0)
    assert list(d) == ["c", "d", "e"]


def test_a_bound_of_one_still_bounds():
    d = BoundedDict(1)
    for k in range(10):
        d.add(k, k)
        assert len(d) == 1
    assert d == {9: 9}
