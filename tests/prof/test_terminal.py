"""prof's output where people first meet it: on a terminal (a pseudo-terminal here) the tables are columnated to
the terminal's width, with source lines and names as they are; through a pipe, the space-separated form awk
reads, unchanged. On the committed H200 LeNet capture."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import re
import subprocess
import sys
import termios

import pytest

from .helpers import parsed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = tmp_path_factory.mktemp("terminal") / "lenet.dict"
    path.write_bytes(parsed("nsys/pyprof/lenet.sqlite.xz"))
    return path


def _on_a_terminal(args: list[str], columns: int, stdin_tty: bool = False) -> tuple[int, str, str]:
    """(exit status, what a terminal of ``columns`` columns shows, stderr) of ``python -m pyprof.prof ARGS``."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # no \r added to each \n: the text as the program wrote it
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen([sys.executable, "-m", "pyprof.prof", *args], stdout=slave,
                         stdin=slave if stdin_tty else subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                         env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            p.kill()
            raise TimeoutError("prof on a terminal wrote nothing for 60 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # the other side closed: the program ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=60), b"".join(chunks).decode(), p.stderr.read().decode()


def test_on_a_terminal_the_table_is_columnated_to_its_width(records):
    rc, text, _ = _on_a_terminal(["-q", "-c", "idx,op,kernel,callsite,flops", str(records)], 100)
    lines = text.splitlines()
    assert rc == 0 and len(lines) == 1 + 124  # the header and a row per record of the capture (sqlite3: 124)
    assert max(len(x) for x in lines) <= 100
    # columnated: the columns start at the same place on every line, so the header's second word ("Op") sits
    # where every row's op starts
    at = lines[0].index("Op")
    assert all(x[at - 1] == " " for x in lines[1:])
    assert "max_pool2d" in text and "max_pool2d " in lines[8]


def test_through_a_pipe_the_table_is_aligned_whole_and_splits_on_two_spaces(records):
    # off a terminal: the columnated table at no width (nothing cut), columns two or more spaces apart, so that
    # a person reads it and a script splits it; the awk form (spaces in values as _) is --space
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-q", "--group-by", "op", str(records)],
                       capture_output=True, text=True, cwd=ROOT)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines[0].split()[:2] == ["Op", "Count"]
    rows = [re.split(r"  +", x.strip()) for x in lines]
    assert len({len(r) for r in rows}) == 1  # every line splits into as many fields as there are headers
    ops = [r[0] for r in rows[1:]]
    assert any(" " in op for op in ops)  # "conv2d (bprop)": spaces kept, not _
    # aligned: each field of the second column (Count, a number: right-aligned) ends where its header ends
    ends = {[m.end() for m in re.finditer(r"\S+(?: \S+)*", x)][1] for x in lines}
    assert len(ends) == 1
    # the per-kernel table likewise: the call site column whole (a terminal would cut its start)
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-q", "-c", "idx,op,callsite", str(records)],
                       capture_output=True, text=True, cwd=ROOT)
    lines = p.stdout.splitlines()
    assert len(lines) == 125 and all(len(re.split(r"  +", x.strip())) == 3 for x in lines)
    assert all(x.rstrip().endswith(".py:" + x.rstrip().rsplit(":", 1)[1]) for x in lines[1:] if ".py:" in x)
    forced = subprocess.run([sys.executable, "-m", "pyprof.prof", "-q", "--space", "-c", "idx,op,callsite",
                             str(records)], capture_output=True, text=True, cwd=ROOT)
    assert all(len(x.split()) == 3 for x in forced.stdout.splitlines()) and "_" in forced.stdout


def test_through_a_pipe_a_long_table_goes_out_in_aligned_blocks():
    # a table of a million kernels is not held whole off a terminal: rows go out in blocks, each aligned to the
    # widest field so far (a later block may widen a column; an earlier one is never misaligned)
    import io

    from pyprof.prof.table.formats import FORMATS

    out = io.StringIO()
    f = FORMATS["columns"](out, ["idx", "op"], ["Idx", "Op"], 0)
    f.BLOCK_ROWS = 3
    f.header()
    f.rows([(0, "a"), (1, "bb"), (2, "c")])
    assert out.getvalue() == "Idx  Op\n  0  a\n  1  bb\n  2  c\n"  # written before close: the first block
    f.rows([(1234, "a  b"), (5, "")])
    f.close()
    assert out.getvalue().splitlines()[4:] == ["1234  a b", "   5  -"]  # runs of spaces as one, empty as -


def test_space_on_a_terminal_asks_for_the_awk_form(records):
    rc, text, _ = _on_a_terminal(["-q", "--space", "-c", "idx,op,callsite", str(records)], 100)
    assert rc == 0 and all(len(x.split()) == 3 for x in text.splitlines())


def test_no_file_at_a_terminal_says_what_to_do_instead_of_waiting():
    rc, text, err = _on_a_terminal([], 100, stdin_tty=True)
    assert rc == 2 and text == "" and err.count("\n") == 1 and "stdin is a terminal" in err


def test_the_help_says_which_form_goes_where():
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-h"], capture_output=True, text=True, cwd=ROOT)
    text = " ".join(p.stdout.split())  # argparse wraps the help lines
    assert "the default: on a terminal its width; in a pipe or a file every column whole" in text
    assert "(for awk)" in text


def test_prof_counts_kernels_as_parse_and_sqlite3_do(records, tmp_path):
    """One vocabulary: GPU activities are kernels, copies and memsets; prof's end-of-run line counts each as
    sqlite3 counts the export's tables (prof used to call all 124 activities kernels)."""
    import lzma
    import sqlite3

    export = tmp_path / "lenet.sqlite"
    export.write_bytes(lzma.decompress(open(os.path.join(ROOT, "tests/data/nsys/pyprof/lenet.sqlite.xz"), "rb").read()))
    con = sqlite3.connect(export)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] if t in tables else 0  # a table nsys left out
         for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")}
    con.close()
    kernels, copies = n["CUPTI_ACTIVITY_KIND_KERNEL"], n["CUPTI_ACTIVITY_KIND_MEMCPY"] + n["CUPTI_ACTIVITY_KIND_MEMSET"]
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-c", "idx", str(records)], capture_output=True,
                       text=True, cwd=ROOT)
    assert (f"pyprof prof: {kernels + copies} GPU activities ({kernels} kernels, {copies} copies and memsets)"
            in p.stderr)


def test_usage_mistakes_are_named_not_ignored(records):
    def prof(*args):
        return subprocess.run([sys.executable, "-m", "pyprof.prof", *args], capture_output=True, text=True,
                              cwd=ROOT)

    export = os.path.join(ROOT, "tests", "data", "nsys", "pyprof", "lenet.sqlite.xz")
    for args, says in (((export,), "is a profiler export, not records: run `pyprof parse"),
                       (("-c", "idx,op", "--group-by", "op", str(records)), "-c picks the per-kernel table's"),
                       (("-c", "idx", "--view", "lines", str(records)), "-c picks the per-kernel table's"),
                       (("--group-by", "op", "--top", "-1", str(records)), "--top must be positive")):
        p = prof(*args)
        assert p.returncode == 2 and p.stdout == "" and says in p.stderr and p.stderr.count("\n") == 1, p.stderr
    # the groups --top keeps: 3 of them (the table's header and 3 rows)
    assert len(prof("--space", "--group-by", "op", "--top", "3", str(records)).stdout.splitlines()) == 4
