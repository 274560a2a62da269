"""The fuzz harness's judge on hand-made runs: what it calls valid output, a clean refusal and each broken promise
(bench/fuzz/judge.py and validate.py decide every count the bench prints)."""
from __future__ import annotations

from pathlib import Path

import pytest

from robust_helpers import ROOT  # noqa: F401  (puts the checkout on sys.path for bench.fuzz)

from bench.fuzz.judge import judge, traceback_signature
from bench.fuzz.registry import Command
from bench.fuzz.validate import check_csv, check_ended, check_html, check_jsonl, check_text, strict_json


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "[1e999]", "-1e400"])
def test_strict_json_refuses_what_json_cannot_hold(text):
    with pytest.raises(ValueError):
        strict_json(text)


def test_jsonl_needs_one_object_per_line_and_a_final_newline():
    assert check_jsonl(b'{"a": 1}\n{"b": [1.5, null]}\n') is None
    assert "not strict JSON" in check_jsonl(b'{"a": NaN}\n')
    assert "not strict JSON at 'inf" in check_jsonl(b'{"a": inf}\n')  # a Python float written with str()
    assert "no newline" in check_jsonl(b'{"a": 1}')
    assert "not an object" in check_jsonl(b"[1]\n")
    assert "not UTF-8" in check_jsonl(b'{"a": "\xff"}\n')


def test_text_tables():
    assert check_text(b"Idx Op\n0 mm\n", None, 2) is None
    assert "U+001B" in check_text(b"Idx Op\n0 \x1b[31mmm\n", None, None)  # a terminal escape printed raw
    assert "3 lines for a header and 1 records" in check_text(b"Idx Op\n0 m\nm\n", None, 2)  # a name's newline
    assert "line 2 is 8 characters wide, more than -w 5" in check_text(b"Idx O\n0 matmul\n", 5, None)
    assert check_csv(b'a,b\n1,"x\ny"\n', 2) is None  # a quoted newline is CSV
    assert "U+0007" in check_csv(b"a,b\n1,\x07\n", None)


def test_html_page():
    page = (b'<!DOCTYPE html><html><body><script type="application/json">{"rows": [1]}</script>'
            b"<script>draw()</script></body></html>\n")
    assert check_html(page) is None
    assert "not strict JSON" in check_html(page.replace(b"[1]", b"[NaN]"))
    # A name that closes the data element: the data is cut short there.
    assert "not strict JSON" in check_html(page.replace(b"[1]", b'["</script><script>x"]'))
    assert "cut short" in check_html(page[:60])


def _run(tmp_path: Path, **kw):
    for d in ("work", "tmp"):
        (tmp_path / d).mkdir(exist_ok=True)
    out = tmp_path / "stdout"
    out.write_bytes(kw.pop("stdout", b""))
    cmd = Command("parse", ["/in/net.sqlite"], ("/in/net.sqlite",), must_succeed=kw.pop("must_succeed", False))
    args = dict(rc=1, killed=False, rss_mb=50.0, stderr="", before=set(), after=set())
    args.update(kw)
    return judge(cmd, args["rc"], args["killed"], args["rss_mb"], args["stderr"], out, tmp_path / "work",
                 tmp_path / "tmp", args["before"], args["after"], 10.0)[0]


ONE_LINE = "pyprof parse: error: /in/net.sqlite: not a profile\n"


END1 = b'{"pyprof_end":true,"schema":2,"records":1}\n'  # parse's end line after one record
END0 = b'{"pyprof_end":true,"schema":2,"records":0}\n'  # ... after none


def test_parse_records_end_with_an_end_line_that_counts_them():
    assert check_ended(b'{"a": 1}\n' + END1) is None
    assert check_ended(b'{"a": 1}\n' + END1 + b'{"b": 2}\n' + END1) is None  # two inputs, each closed
    assert check_ended(END0) is None  # a profile without kernels: the end line alone
    assert "do not end with parse's end line" in check_ended(b'{"a": 1}\n')
    assert "do not end with parse's end line" in check_ended(b"")
    assert "counts 1 records, 2 came before it" in check_ended(b'{"a": 1}\n{"b": 2}\n' + END1)


def test_outcomes(tmp_path):
    assert _run(tmp_path, rc=0, stdout=b'{"a": 1}\n' + END1) == "ok"
    assert _run(tmp_path, rc=0, stdout=b'{"a": 1}\n') == "invalid-output"  # exit 0 with records cut short
    assert _run(tmp_path, stderr=ONE_LINE) == "refused"
    assert _run(tmp_path, stderr=ONE_LINE, must_succeed=True) == "refused-valid"
    assert _run(tmp_path, killed=True, stderr=ONE_LINE) == "hang"
    assert _run(tmp_path, rc=-9) == "crash"
    assert _run(tmp_path, rss_mb=501.0, stderr=ONE_LINE) == "over-memory"
    assert _run(tmp_path, stderr="Traceback (most recent call last):\n  x\nKeyError: 1\n") == "traceback"
    assert _run(tmp_path, rc=0, stdout=b'{"a": NaN}\n' + END1) == "invalid-output"
    # parse's records cut by a failure part way, whole lines without the end line: refused (prof and report
    # refuse such a stream); a complete stream, or a half-written line, before a refusal is partial output.
    assert _run(tmp_path, stdout=b'{"a": 1}\n', stderr=ONE_LINE) == "refused"
    assert _run(tmp_path, stdout=b'{"a": 1}\n' + END1, stderr=ONE_LINE) == "partial-output"
    assert _run(tmp_path, stdout=b'{"a": 1}\n{"b"', stderr=ONE_LINE) == "partial-output"
    assert _run(tmp_path, stderr=ONE_LINE + "(lexical error)\n") == "multi-line-refusal"
    assert _run(tmp_path, stderr="pyprof parse: error: input: line 3: bad\n") == "nameless-refusal"
    assert _run(tmp_path, stderr=ONE_LINE, after={"net.sqlite.tmp"}) == "left-behind"
    (tmp_path / "tmp" / "spool").write_text("x")
    assert _run(tmp_path, rc=0, stdout=END0) == "left-behind"


def test_traceback_signature_is_the_innermost_pyprof_frame():
    tb = ('Traceback (most recent call last):\n  File "/x/pyprof/parse/cli.py", line 9, in main\n    run()\n'
          '  File "/x/pyprof/parse/readers/nsys.py", line 107, in gpus\n    q()\n'
          '  File "/usr/lib/python3/sqlite3/x.py", line 1, in q\n    z\nsqlite3.OperationalError: no such column\n')
    assert traceback_signature(tb) == ("sqlite3.OperationalError in pyprof/parse/readers/nsys.py:gpus",
                                       "pyprof/parse/readers/nsys.py:107")
