"""prof.totals: group records merge field by field (a kernel group's shortest and longest take min and max)."""
from __future__ import annotations

from pyprof.prof.totals import KernelGroup, Totals


def test_merge_adds_every_field():
    a, b = Totals(2, 300, 10, 1.5, 100, 300), Totals(1, 50, 0, 0.0, 0, 0)
    a.merge(b)
    assert a == Totals(kernels=3, ns=350, flops=10, ideal_ns=1.5, tc_ns=100, roof_ns=300)


def test_a_kernel_group_keeps_the_shortest_and_the_longest():
    a = KernelGroup(calls=2, ns=30, min_ns=10, max_ns=20, occ_x_ns=5.0, occ_known_ns=10)
    b = KernelGroup(calls=1, ns=40, min_ns=40, max_ns=40)
    merged = a.copy()
    merged.merge(b)
    assert (merged.calls, merged.ns, merged.min_ns, merged.max_ns, merged.occ_x_ns) == (3, 70, 10, 40, 5.0)
    assert (a.calls, a.max_ns) == (2, 20)  # the copy took the merge, not the original
