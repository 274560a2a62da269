"""pyprof.common's BoundedDict, the one eviction policy of every cache and window of the stages, no_cyclic_gc, and
the commands' one BLAS thread."""
from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from pyprof.common import BoundedDict, no_cyclic_gc


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


def _generation_of(obj) -> int | None:
    return next((g for g in range(3) if any(o is obj for o in gc.get_objects(generation=g))), None)


def test_what_the_body_keeps_is_old_after_it():
    """Objects made under no_cyclic_gc and still held after it go to the oldest generation at once (a parse's caches:
    the next young collection would walk them all); the collector is on again."""
    assert gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert _generation_of(kept) == 2 and _generation_of(kept[-1]) == 2
    assert gc.get_freeze_count() == 0


def test_a_program_that_froze_objects_keeps_them_frozen():
    """Where the program froze objects of its own, they stay frozen and what the body made stays young."""
    mine = [["frozen"]]
    gc.freeze()
    try:
        with no_cyclic_gc():
            kept = [[i] for i in range(100)]
        assert _generation_of(mine) is None  # in no generation the collector walks: still frozen
        assert _generation_of(kept) in (0, 1)  # young (a collection since may have moved it to the middle one)
    finally:
        gc.unfreeze()


# What numpy's import finds in OPENBLAS_NUM_THREADS (OpenBLAS reads it once, as numpy loads it), recorded by an
# import hook in a fresh interpreter: the commands' one_blas_thread must come before their stage imports numpy.
_BLAS_AT_NUMPY_IMPORT = r"""
import os, sys
class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            print("OPENBLAS_NUM_THREADS at numpy import:", os.environ.get("OPENBLAS_NUM_THREADS"))
            sys.meta_path.remove(self)
        return None
sys.meta_path.insert(0, Hook())
"""


@pytest.mark.parametrize("how", [
    "from pyprof import cli\ntry:\n    cli.main(['{stage}', '--help'])\nexcept SystemExit:\n    pass",
    # python -m pyprof.STAGE: the interpreter imports the package before its __main__ (orig_argv as -m sets it)
    "sys.orig_argv = [sys.executable, '-m', 'pyprof.{stage}', 'x']\nimport pyprof.{stage}\nimport pyprof.{stage}.cli",
    "sys.orig_argv = [sys.executable, '-mpyprof.{stage}']\nimport pyprof.{stage}\nimport pyprof.{stage}.cli",
])
@pytest.mark.parametrize("stage", ["parse", "prof", "report", "diff"])
def test_the_commands_keep_blas_to_one_thread_before_numpy_loads(how, stage):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", _BLAS_AT_NUMPY_IMPORT + how.format(stage=stage)], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "OPENBLAS_NUM_THREADS at numpy import: 1\n" in out


def test_importing_a_stage_in_a_program_leaves_blas_alone():
    """A notebook or script that imports pyprof.parse keeps numpy's own thread count."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", _BLAS_AT_NUMPY_IMPORT + "import pyprof.parse, pyprof.prof"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "OPENBLAS_NUM_THREADS at numpy import: None\n" in out
