"""Issue 44 (no dead ends): a table with no rows says why, on stderr after the tables, with or without -v, so that
no one is left with a bare header. The sentence is the view's own (Table.empty); -q silences it like every note."""
from __future__ import annotations

import io

import pytest

from pyprof.prof.cli import main
from pyprof.prof.tables import Table
from pyprof.prof.terminal import print_tables
from pyprof.prof.views.memory import NO_EVENTS

VLLM = "external/tracelens_vllm_decode_full_graph_execution.json.gz"


@pytest.fixture(scope="module")
def vllm_records(tmp_path_factory):
    from shared_files import CORPUS, require_shared

    from pyprof.parse import parse_file

    require_shared()
    path = tmp_path_factory.mktemp("vllm") / "vllm.dict"
    with open(path, "w") as f:
        parse_file(str(CORPUS / VLLM), f)
    return str(path)


def test_no_finding_says_so_and_names_the_rules_that_could_not_judge(vllm_records, capsys):
    # vLLM's decode on an MI300 (TraceLens): the trace's deviceProperties name no GPU, so no peaks for the two
    # roofline rules, and its kernels carry neither registers nor shared memory nor the profiler's occupancy
    # estimate (their args: grid, block, stream, device, correlation, kind, External id)
    assert main([vllm_records, "--view", "recommendations"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1  # the header: no finding
    said = ("pyprof prof: recommendations: No rule fired; 3 could not judge for want of data (far_from_roofline, "
            "low_occupancy, memory_bound: the notes say what each lacks).")
    assert err.splitlines()[0] == said
    assert main([vllm_records, "--view", "recommendations", "-v"]) == 0
    err = capsys.readouterr().err
    assert err.count(said) == 1 and "low_occupancy: cannot judge occupancy" in err  # the notes it points to
    assert main([vllm_records, "--view", "recommendations", "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_memory_without_events_says_how_to_record_them(vllm_records, capsys):
    # the trace was written without profile_memory: no "[memory]" event in it
    assert main([vllm_records, "--view", "memory"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"pyprof prof: memory: {NO_EVENTS}"


def test_a_table_with_rows_says_nothing_of_being_empty():
    t = Table.of("x", "X", [("a", "A")], rows=[[1]], empty="nothing here")
    said, empty = io.StringIO(), Table.of("y", "Y", [("a", "A")], empty="nothing here")
    print_tables([t], io.StringIO(), None, said=said)
    assert said.getvalue() == ""
    print_tables([empty], io.StringIO(), None, said=said)
    assert said.getvalue() == "pyprof prof: y: nothing here\n"
