"""Source text is read only from .py files under the source roots the user named (pyprof.prof.source_lines): a
file under a root is shown, one outside is not looked at, ``../`` and symlinks out of a root are refused, and a
file is read only up to its bound. Each refusal is counted for the views' one note."""
from __future__ import annotations

import os

import pytest

from pyprof.common import UsageError
from pyprof.prof import source_lines
from pyprof.prof.source_lines import CUT, NOT_PYTHON, NOT_REGULAR, OUT_OF_RANGE, OUTSIDE, SourceText


@pytest.fixture
def tree(tmp_path):
    """``src/`` (the root: pkg/model.py) beside ``outside/`` (secret.py, a file no root holds)."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "src" / "pkg" / "model.py").write_text("import torch\n    y = layer(x)  \n")
    (tmp_path / "outside" / "secret.py").write_text("TOKEN = 'canary-outside'\n")
    return tmp_path


def test_a_file_under_a_root_is_shown(tree):
    s = SourceText([str(tree / "src")])
    # the recorded path itself, under the root
    assert s.line(f"{tree}/src/pkg/model.py:2") == "y = layer(x)"
    # a path of the capture machine: its trailing folders looked up under the root
    assert s.line("/home/someone/checkout/pkg/model.py:1") == "import torch"
    # a relative path: under the root only
    assert s.line("pkg/model.py:2") == "y = layer(x)"
    assert s.note([f"{tree}/src/pkg/model.py:2", "pkg/model.py:2"]) is None  # all shown: nothing to say


def test_a_file_outside_every_root_is_not_read(tree, monkeypatch):
    s = SourceText([str(tree / "src")])
    touched = []
    real_open, real_stat = os.open, os.stat
    monkeypatch.setattr(source_lines.os, "open", lambda p, *a: touched.append(p) or real_open(p, *a))
    monkeypatch.setattr(source_lines.os, "stat", lambda p, *a, **k: touched.append(p) or real_stat(p, *a, **k))
    site = f"{tree}/outside/secret.py:1"
    assert s.line(site) is None
    # neither the file nor any path outside the root was looked at: only its tails tried under src/
    assert touched and all(str(p).startswith(str(tree / "src") + "/") for p in touched)
    note = s.note([site])
    assert note.startswith(f"Source text not shown for 1 line: 1 {OUTSIDE}") and "--source-root DIR" in note


def test_dot_dot_out_of_a_root_is_refused(tree):
    s = SourceText([str(tree / "src")])
    assert s.line("../outside/secret.py:1") is None
    assert s.line("pkg/../../outside/secret.py:1") is None
    assert s.note(["../outside/secret.py:1", "pkg/../../outside/secret.py:1"]).startswith(
        f"Source text not shown for 2 lines: 2 {OUTSIDE}")


def test_symlinks_out_of_a_root_are_not_followed(tree):
    (tree / "src" / "link.py").symlink_to(tree / "outside" / "secret.py")
    (tree / "src" / "linked_dir").symlink_to(tree / "outside")
    s = SourceText([str(tree / "src")])
    assert s.line(f"{tree}/src/link.py:1") is None
    assert s.line("linked_dir/secret.py:1") is None
    # a symlink that stays inside the root is followed (its target is under the root)
    (tree / "src" / "alias.py").symlink_to(tree / "src" / "pkg" / "model.py")
    assert s.line("alias.py:1") == "import torch"


def test_a_symlink_to_a_device_is_refused_without_reading(tree, monkeypatch):
    (tree / "src" / "zero.py").symlink_to("/dev/zero")
    reads = []
    monkeypatch.setattr(source_lines.os, "read", lambda *a: reads.append(a) or b"")
    s = SourceText([str(tree / "src")])
    assert s.line("zero.py:1") is None and not reads


def test_only_python_files_are_read(tree):
    (tree / "src" / ".env").write_text("SECRET=1\n")
    (tree / "src" / "notes.py.txt").write_text("x\n")
    s = SourceText([str(tree / "src")])
    assert s.line("/capture/.env:1") is None and s.line("notes.py.txt:1") is None
    # a .py name that is a symlink to a file of another kind, inside the root: refused by the resolved name
    (tree / "src" / "env.py").symlink_to(tree / "src" / ".env")
    assert s.line("env.py:1") is None
    assert s.note(["/capture/.env:1", "notes.py.txt:1", "env.py:1"]).startswith(
        f"Source text not shown for 3 lines: 3 {NOT_PYTHON}")


def test_a_fifo_under_a_root_is_not_opened_for_reading(tree):
    # O_NONBLOCK: opening a FIFO with no writer returns at once; fstat says it is no regular file
    os.mkfifo(tree / "src" / "pipe.py")
    s = SourceText([str(tree / "src")])
    assert s.line("pipe.py:1") is None
    assert s.note(["pipe.py:1"]).startswith(f"Source text not shown for 1 line: 1 {NOT_REGULAR}")


def test_an_oversize_file_is_read_only_up_to_its_bound(tree, monkeypatch):
    # line 1, then lines of 1023 characters + newline up to 1 MiB past the bound, then the last line
    filler = ("#" * 1023 + "\n") * ((source_lines.MAX_FILE_BYTES >> 10) + 1024)
    (tree / "src" / "big.py").write_text("first = 1\n" + filler + "last = 2\n")
    n_last = 1 + filler.count("\n") + 1
    got = []
    real_read = os.read
    monkeypatch.setattr(source_lines.os, "read", lambda fd, n: got.append(real_read(fd, n)) or got[-1])
    s = SourceText([str(tree / "src")])
    assert s.line("big.py:1") == "first = 1"
    assert s.line(f"big.py:{n_last}") is None
    assert sum(map(len, got)) == source_lines.MAX_FILE_BYTES  # of the file's 5 MiB + 19 bytes
    assert s.note([f"big.py:{n_last}"]).startswith(f"Source text not shown for 1 line: 1 {CUT}")


def test_all_files_together_are_bounded(tree, monkeypatch):
    monkeypatch.setattr(source_lines, "MAX_TOTAL_BYTES", 20)
    (tree / "src" / "a.py").write_text("a = 1\n" * 3)  # 18 bytes: read
    (tree / "src" / "b.py").write_text("b = 1\n")  # the budget's 2 bytes left: cut
    s = SourceText([str(tree / "src")])
    assert s.line("a.py:3") == "a = 1" and s.line("b.py:1") is None
    assert s.note(["b.py:1"]).startswith(f"Source text not shown for 1 line: 1 {source_lines.OVER_BUDGET}")


def test_a_long_line_is_cut(tree):
    (tree / "src" / "min.py").write_text("x" * 2000 + "\n")
    shown = SourceText([str(tree / "src")]).line("min.py:1")
    assert shown == "x" * source_lines.MAX_LINE_CHARS + "...[1500 more characters]"


def test_lines_are_numbered_as_python_numbers_them(tree):
    # \f and \x1c are no line breaks for Python (str.splitlines breaks at both); \r and \r\n are
    (tree / "src" / "ff.py").write_bytes(b"a = 1\x0c\nb = 2\x1c\r\nc = 3\rd = 4\n")
    s = SourceText([str(tree / "src")])
    assert [s.line(f"ff.py:{n}") for n in (1, 2, 3, 4)] == ["a = 1", "b = 2", "c = 3", "d = 4"]
    assert s.line("ff.py:5") is None and s.line("ff.py:0") is None
    assert s.note(["ff.py:5", "ff.py:0"]).startswith(f"Source text not shown for 2 lines: 2 {OUT_OF_RANGE}")


@pytest.mark.parametrize("site", ["a\x00b.py:1", "model.py:\u00b2", "model.py:" + "9" * 5000, "x" * 5000 + ".py:1",
                                  "model.py", ":3", "/:1"])
def test_a_malformed_call_site_is_no_error(tree, site):
    assert SourceText([str(tree / "src")]).line(site) is None


def test_a_root_that_is_no_folder_is_a_usage_error(tree):
    with pytest.raises(UsageError, match="--source-root .*not a folder"):
        SourceText([str(tree / "src" / "pkg" / "model.py")])
    with pytest.raises(UsageError):
        SourceText([str(tree / "missing")])


def test_the_default_root_is_the_current_folder(tree, monkeypatch):
    monkeypatch.chdir(tree / "src")
    s = SourceText()
    assert s.line("/elsewhere/pkg/model.py:1") == "import torch"
    assert s.line(f"{tree}/outside/secret.py:1") is None


def test_the_paths_looked_up_are_bounded(tree, monkeypatch):
    monkeypatch.setattr(source_lines, "MAX_PATHS", 2)
    s = SourceText([str(tree / "src")])
    assert s.line("/x/a.py:1") is None and s.line("/x/b.py:1") is None  # looked up: not there
    assert s.line("pkg/model.py:1") is None  # the third path: not looked up, though the root holds it
    assert s.note(["pkg/model.py:1"]).startswith(f"Source text not shown for 1 line: 1 {source_lines.TOO_MANY}")
    assert s.line("/x/a.py:2") is None  # a path already looked up is answered from what was found


def test_a_root_given_through_a_symlink_works(tree):
    # the candidate is checked against the root as given, then resolved against the root resolved
    (tree / "alias").symlink_to(tree / "src")
    s = SourceText([str(tree / "alias")])
    assert s.line("/capture/pkg/model.py:1") == "import torch"
    assert s.line(f"{tree}/alias/pkg/model.py:2") == "y = layer(x)"
    assert s.line(f"{tree}/src/pkg/model.py:2") == "y = layer(x)"  # by its tail: src/ is no root as written
