"""Is a successful command's output valid? Strict JSON lines, a complete HTML page with strict JSON data, text
tables one line per row with no raw control characters. Returns the first problem found, or None."""
from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from bench.fuzz.registry import Command

#: Characters that must never reach a terminal raw: C0 controls but tab and newline, DEL, C1 controls, and the
#: Unicode line and paragraph separators (a name holding one would end the row early).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity (and 1e999, which Python reads as inf)."""
    value = json.loads(text, parse_constant=_no_constant)
    _finite(value)
    return value


def _finite(value) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            raise ValueError("a number too large for a double (read as infinity)")
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def check_jsonl(data: bytes, objects: bool = True) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 at byte {e.start}"
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        return "last line has no newline (cut short?)"
    for i, line in enumerate(lines, 1):
        try:
            v = strict_json(line)
        except RecursionError:
            return f"line {i}: nested too deep to check"
        except json.JSONDecodeError as e:
            return f"line {i}: not strict JSON at {line[e.pos:e.pos + 24]!r}"
        except ValueError as e:
            return f"line {i}: not strict JSON ({str(e)[:80]})"
        if objects and not isinstance(v, dict):
            return f"line {i}: a JSON {type(v).__name__}, not an object"
    return None


def check_ended(data: bytes) -> str | None:
    """Parse's records (strict JSON lines already): each input's records are followed by parse's end line,
    which counts them, and the output ends with one; from schema 3 on, each input's records are preceded by
    parse's header line (docs/record.md), which is not a record; from schema 4 on, side lines (memory, host time)
    may follow the records, before the end line, and are not records either."""
    since = 0
    header = False  # a header line since the last end line
    side = False  # a side line since the last end line
    lines = [x for x in data.split(b"\n") if x.strip()]
    for i, line in enumerate(lines, 1):
        d = json.loads(line)
        if "pyprof_header" in d:
            if header or since or side:
                return f"line {i}: a header line inside an input's records"
            header = True
            continue
        if "pyprof_side" in d:
            if not header:
                return f"line {i}: a side line without parse's header line"
            side = True
            continue
        if "pyprof_end" not in d:
            if side:
                return f"line {i}: a record after the side lines"
            since += 1
            continue
        if d.get("records") != since:
            return f"line {i}: the end line counts {d.get('records')} records, {since} came before it"
        if isinstance(d.get("schema"), int) and d["schema"] >= 3 and not header:
            return f"line {i}: records of schema {d['schema']} without parse's header line"
        since, header, side = 0, False, False
    if not lines or "pyprof_end" not in json.loads(lines[-1]):
        return "exit 0 but the records do not end with parse's end line"
    return None


def check_text(data: bytes, width: int | None, expect_lines: int | None) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 at byte {e.start}"
    m = RAW_CONTROL.search(text)
    if m:
        line = text.count("\n", 0, m.start()) + 1
        return f"raw control character U+{ord(m.group()):04X} on line {line}"
    lines = text.splitlines()
    if width:
        for i, line in enumerate(lines, 1):
            if len(line) > width:
                return f"line {i} is {len(line)} characters wide, more than -w {width}"
    if expect_lines is not None and len(lines) != expect_lines:
        return f"{len(lines)} lines for a header and {expect_lines - 1} records"
    return None


def check_csv(data: bytes, expect_lines: int | None) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 at byte {e.start}"
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as e:
        return f"not CSV: {e}"
    for i, row in enumerate(rows, 1):
        for field in row:
            m = RAW_CONTROL.search(field)
            if m:
                return f"raw control character U+{ord(m.group()):04X} in CSV row {i}"
        if rows and len(row) != len(rows[0]):
            return f"CSV row {i} has {len(row)} fields, the header {len(rows[0])}"
    if expect_lines is not None and len(rows) != expect_lines:
        return f"{len(rows)} CSV rows for a header and {expect_lines - 1} records"
    return None


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict, str]] = []
        self._in: dict | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._in, self._buf = dict(attrs), []

    def handle_data(self, data):
        if self._in is not None:
            self._buf.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._in is not None:
            self.scripts.append((self._in, "".join(self._buf)))
            self._in = None


def check_html(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"HTML not UTF-8 at byte {e.start}"
    if not text.lstrip().lower().startswith("<!doctype html"):
        return "HTML does not start with <!DOCTYPE html>"
    if not text.rstrip().lower().endswith("</html>"):
        return "HTML does not end with </html> (cut short?)"
    page = _Page()
    page.feed(text)
    page.close()
    if page._in is not None:
        return "a <script> element is never closed"
    data_scripts = [body for attrs, body in page.scripts if attrs.get("type") == "application/json"]
    if not data_scripts:
        return "no JSON data element in the page"
    for body in data_scripts:
        try:
            strict_json(body)
        except RecursionError:
            return "page data nested too deep to check"
        except ValueError as e:
            return f"page data is not strict JSON ({str(e)[:80]})"
    return None


def check_json_file(data: bytes) -> str | None:
    try:
        strict_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return f"trace file is not strict JSON ({str(e)[:80]})"
    return None


def check_output(cmd: Command, stdout: bytes, work: Path) -> str | None:
    """The first problem of a successful run's stdout and output files, or None."""
    kind = cmd.stdout_kind
    if kind is None and stdout.strip() and cmd.stage == "parse":
        return "records on stdout although -o was given"
    problem = None
    if kind == "jsonl":
        problem = check_jsonl(stdout, objects=cmd.stage == "parse")
        if problem is None and cmd.stage == "parse":
            problem = check_ended(stdout)
    elif kind == "text":
        problem = check_text(stdout, cmd.width, cmd.expect_lines)
    elif kind == "csv":
        problem = check_csv(stdout, cmd.expect_lines)
    if problem:
        return f"stdout: {problem}"
    for name, out_kind in ((cmd.output, cmd.output_kind), *cmd.extra_outputs):
        if not name or name.startswith("/dev/"):
            continue
        path = work / name
        if not path.is_file():
            return f"exit 0 but no {name} written"
        data = path.read_bytes()
        problem = {"jsonl": check_jsonl, "html": check_html, "json": check_json_file}[out_kind](data)
        if problem is None and out_kind == "jsonl" and cmd.stage == "parse":
            problem = check_ended(data)
        if problem:
            return f"{name}: {problem}"
    return None
