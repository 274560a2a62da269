"""Fixtures of the robustness tests (issue 13): a few small real seeds, made ready once per session."""
from __future__ import annotations

import pytest

from robust_helpers import CORPUS, DATA

from bench.fuzz.judge import unlock_tree
from bench.fuzz.seeds import prepare


@pytest.fixture(autouse=True)
def _unlocked(tmp_path):
    """Read-only folders made for a test are immutable (root ignores modes): undone, or pytest could not
    remove them."""
    yield
    unlock_tree(tmp_path)


@pytest.fixture
def case(tmp_path):
    """A case's folder, with the ``in`` folder its inputs go in."""
    (tmp_path / "in").mkdir()
    return tmp_path


@pytest.fixture(scope="session")
def small_seeds(tmp_path_factory, shared):
    """Committed captures (one nsys export of each marker kind, two Kineto traces), one nvprof file of the shared
    corpus, and records made from them by parse: the seeded mutations start from these."""
    nvprof = CORPUS / "nvprof" / "nvprof_v18_vectoradd.nvvp"
    assert nvprof.is_file(), f"shared corpus file missing: {nvprof}"
    seeds = prepare(tmp_path_factory.mktemp("seeds"), log=lambda m: None,
                    nsys=[DATA / "nsys" / "pyprof" / "custom_module.sqlite.xz",
                          DATA / "nsys" / "emit_nvtx" / "lenet.sqlite.xz"],
                    nvprof=[nvprof],
                    kineto=[DATA / "kineto" / "custom_module.pt.trace.json.gz",
                            DATA / "kineto" / "custom_function.pt.trace.json.gz"],
                    records_from=("custom_module.sqlite", "custom_function.pt.trace.json"), not_profiles=[])
    assert not seeds.skipped, seeds.skipped
    return seeds
