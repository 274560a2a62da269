"""The lines view and the recommendations show a line's source text only from the source roots
(pyprof.prof.source_lines), and say once, in one note, how many lines they could not show and why."""
from __future__ import annotations

import pytest
from report_helpers import kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.source_lines import NOT_PYTHON, OUTSIDE, SourceText
from pyprof.prof.views import build


@pytest.fixture
def roots(tmp_path):
    """``src/train.py`` (the root), whose line 80 is ``loss.item()``, beside ``outside/secret.py`` (a name no root
    holds: a recorded path's trailing parts are looked up under the roots too)."""
    for folder, name, text in (("src", "train.py", "loss.item()"), ("outside", "secret.py", "SECRET = 'canary'")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("\n" * 79 + f"    {text}\n")
    return tmp_path


def _tables(recs, source: SourceText, names):
    agg = aggregate([("x", recs)])
    agg.source = source
    return build(agg, names)


def _unshown(t) -> list[str]:
    return [n for n in t.notes if n.startswith("Source text not shown")]


def test_lines_view_shows_a_line_under_a_root(roots):
    recs = [kernel(1000, 50, callsite="/capture/proj/train.py:80")]
    (t,) = _tables(recs, SourceText([str(roots / "src")]), ["lines"])
    assert t.rows[0][t.columns.index("source")] == "loss.item()"
    assert not _unshown(t)


def test_lines_view_says_once_what_it_did_not_show(roots):
    # three lines: one outside every root (its file exists, in outside/), one not a .py file, one '-' (no call
    # site, which has no source to show and is not counted)
    recs = [kernel(1000, 50, callsite=f"{roots}/outside/secret.py:80"),
            kernel(2000, 50, callsite="/etc/passwd:1"), kernel(3000, 50)]
    (t,) = _tables(recs, SourceText([str(roots / "src")]), ["lines"])
    assert [r[t.columns.index("source")] for r in t.rows] == [None, None, None]
    assert _unshown(t) == [f"Source text not shown for 2 lines: 1 {NOT_PYTHON}, 1 {OUTSIDE} (--source-root DIR "
                           "names a folder to read them from); source is read only from Python files under the "
                           "source roots (docs/views.md, lines)."]
    assert "canary" not in repr(t.rows) + repr(t.notes)


def _sync(callsite):
    # .item(): a 2 us copy, then the GPU idle 100 us (test_views_recommend.test_sync_copies_rule's case)
    k = dict(gpu="NVIDIA H200")
    return [kernel(10_000, 10_000, **k),
            kernel(20_000, 2_000, kind="memcpy", kShortName="[CUDA memcpy DtoH]", copy_kind="DtoH", bytes=4,
                   op=["item"], api="cudaMemcpyAsync", callsite=callsite, **k),
            kernel(122_000, 10_000, **k)]


def test_a_finding_shows_the_text_of_a_line_under_a_root(roots):
    (t,) = _tables(_sync("/x/train.py:80"), SourceText([str(roots / "src")]), ["recommendations"])
    row = next(r for r in t.rows if r[0] == "sync_copies")
    assert row[1] == "item at train.py:80 (loss.item())"
    assert not _unshown(t)


def test_a_finding_names_the_line_alone_outside_the_roots(roots):
    (t,) = _tables(_sync(f"{roots}/outside/secret.py:80"), SourceText([str(roots / "src")]), ["recommendations"])
    row = next(r for r in t.rows if r[0] == "sync_copies")
    assert row[1] == "item at secret.py:80"
    assert len(_unshown(t)) == 1 and _unshown(t)[0].startswith(f"Source text not shown for 1 line: 1 {OUTSIDE}")
    assert "canary" not in repr(t.rows) + repr(t.notes)
