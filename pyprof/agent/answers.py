"""Small JSON answers about one profile or records file, for a coding agent: the headline, a view's top rows,
the findings with their evidence, the kernels of one op or line, and the difference of two runs.

Each answer fits a budget (MAX_ANSWER_CHARS of JSON, about 3,000 tokens): rows beyond it are left out and the
answer says how many there were. Each cites what it rests on: the file, its GPU activities, the record indices
of the kernels it lists, and the pyprof command that prints the same rows in full. An answer reads the files its
caller names and nothing else: no source text is read unless the server was given a folder for it.
"""
from __future__ import annotations

import json
import os
from contextlib import ExitStack

from pyprof.common import InputError, UsageError
from pyprof.prof.source_lines import SourceText
from pyprof.prof.tables import Table

#: An answer's JSON is cut to this many characters (rows are left out from the end): about 3,000 tokens.
MAX_ANSWER_CHARS = 12_000
#: A text field longer than this is cut, saying how much was left out.
MAX_TEXT_CHARS = 1_000
#: What the note saying how many rows were left out may take.
_NOTE_CHARS = 120
#: Analysed inputs kept, the most recently used.
KEPT_INPUTS = 4


class Analysed:
    """One input: its records (the input, or an export parsed once into a temporary folder that ``stack``
    removes), and, when an answer first needs them, the views' tables of all workers and the headline, made
    once."""

    def __init__(self, path: str, source, stack: ExitStack, source_roots: list[str]) -> None:
        self.path = path
        self.source = source  # report.cli's Source: the name the views give the input, its records file
        self.records: str = source.path
        self.stack = stack
        self._roots = source_roots
        self._analysis: tuple | None = None

    def _analysed(self) -> tuple:
        if self._analysis is None:
            import pyprof.prof  # noqa: F401  (registers the built-in formulas)
            from pyprof.report.cli import analyse

            tables, acts, head = analyse([self.source], source=SourceText(self._roots))
            self._analysis = (tables, head, len(acts))
        return self._analysis

    @property
    def tables(self) -> list[Table]:
        return self._analysed()[0]

    @property
    def headline(self):
        return self._analysed()[1]

    @property
    def activities(self) -> int:
        return self._analysed()[2]


class Profiles:
    """The inputs an agent asked about, each parsed once and kept by (real path, size, modification time): a
    file rewritten since is read again. ``source_roots``: folders whose source text the lines view may show
    (none by default: nothing is read that the caller did not name)."""

    def __init__(self, source_roots: list[str] | None = None) -> None:
        self.source_roots = list(source_roots or [])
        self._kept: dict[tuple, Analysed] = {}

    def get(self, path: str) -> Analysed:
        if not isinstance(path, str) or not path:
            raise UsageError("path: the profile or records file to read")
        if not os.path.isfile(path):
            raise InputError(path, "no such file" if not os.path.exists(path) else "not a file")
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        hit = self._kept.pop(key, None)
        if hit is None:
            hit = self._read(path)
        self._kept[key] = hit  # the most recent last
        while len(self._kept) > KEPT_INPUTS:
            self._kept.pop(next(iter(self._kept))).stack.close()
        return hit

    def _read(self, path: str) -> Analysed:
        from pyprof.report.cli import records_sources

        stack = ExitStack()
        try:
            (source,) = records_sources([path], stack)
            return Analysed(path, source, stack, self.source_roots)
        except BaseException:
            stack.close()
            raise

    def close(self) -> None:
        for a in self._kept.values():
            a.stack.close()
        self._kept.clear()


# -- the answers ----------------------------------------------------------------------------------------------
def headline(profiles: Profiles, path: str) -> dict:
    """The page's headline: step time (the program's own beside the captured one), GPU busy, GPU time, how much
    of it has modelled FLOPs, and the top ops, lines and findings."""
    a = profiles.get(path)
    h = a.headline.to_dict()
    return _fit({"file": path, "headline": h,
                 "cite": _cite(a, f"pyprof report {_q(path)} -o report.html (its headline)")})


def view(profiles: Profiles, path: str, name: str, top: int = 10) -> dict:
    """The first ``top`` rows of a view (all workers), as ``pyprof prof --view NAME --jsonl`` prints them, with
    its notes."""
    from pyprof.prof.views import names

    a = profiles.get(path)
    if name not in names():
        raise UsageError(f"view {name!r}: choose one of {', '.join(names())}")
    tables = [t for t in a.tables if t.name == name and t.worker is None]
    out = {"file": path, "view": name, "tables": [
        {"title": t.title, "rows_total": len(t.rows), "rows": _rows(t, top), "notes": t.notes[:5],
         **({"empty": t.empty} if not t.rows and t.empty else {})} for t in tables],
        "cite": _cite(a, _prof(a, f"--view {name} --jsonl"))}
    return _fit(out)


def findings(profiles: Profiles, path: str, top: int = 5) -> dict:
    """The recommendations view's first ``top`` findings, most at stake first: the rule, what it is about, the
    evidence it rests on, the time it would save and what to do."""
    a = profiles.get(path)
    (t,) = [t for t in a.tables if t.name == "recommendations" and t.worker is None] or [None]
    rows = _rows(t, top) if t is not None else []
    return _fit({"file": path, "findings_total": len(t.rows) if t is not None else 0, "findings": rows,
                 "notes": (t.notes[:5] if t is not None else []),
                 **({"empty": t.empty} if t is not None and not t.rows and t.empty else {}),
                 "cite": _cite(a, _prof(a, "--view recommendations --jsonl"))})


#: The per-kernel columns an answer about kernels gives (pyprof prof -c): docs/prof.md names each.
KERNEL_COLUMNS = ["idx", "dir", "op", "kernel", "params", "sil", "tc", "flops", "bytes", "tflops", "roofline",
                  "callsite", "note"]


def kernels(profiles: Profiles, path: str, op: str | None = None, line: str | None = None, top: int = 20) -> dict:
    """The kernels of one op (as the operators view names it: ``linear`` takes ``linear (bprop)`` too) or of one
    line (``file.py:31``, the end of the call site; a backward kernel's is its forward op's), in input order,
    with their modelled numbers as ``pyprof prof -c ... --jsonl`` gives them; ``idx`` is each record's index."""
    import io

    from pyprof.prof.load.reader import read_records
    from pyprof.prof.table.groups import callsite_key, op_key
    from pyprof.prof.table.per_kernel import run

    if not op and not line:
        raise UsageError("kernels: give op or line")
    a = profiles.get(path)

    def wanted(d: dict) -> bool:
        if op:
            k = op_key(d)
            if k != op and k.rsplit(" (", 1)[0] != op:
                return False
        if line:
            site = callsite_key(d)
            if not (site == line or site.endswith("/" + line)):
                return False
        return True

    with open(a.records, "rb") as f:
        chosen = [(i, d) for i, (_n, d) in enumerate(read_records(f, a.records)) if wanted(d)]
    buf = io.StringIO()
    # each record's index in the file is its line number for the modeller, so a call's kernels are as far apart as
    # in the whole file (the CLI's sharing window); run numbers the rows from 0: each takes its index back below
    run(chosen, buf, KERNEL_COLUMNS, "jsonl", header=False)
    rows = [json.loads(x) for x in buf.getvalue().splitlines()]
    for r, (i, _d) in zip(rows, chosen):
        r["idx"] = i
    what = " ".join(f"{k}={v}" for k, v in (("op", op), ("line", line)) if v)
    out = {"file": path, "selected": what, "kernels_total": len(rows), "kernels": rows[:max(top, 0)],
           "time_ms": round(sum(r.get("sil") or 0 for r in rows) / 1e6, 4),
           "cite": {**_cite(a, _prof(a, f"-c {','.join(KERNEL_COLUMNS)} --jsonl")),
                    "records": "each kernel's idx, its record's index in the file; kernels_total and time_ms count "
                               "every selected record"}}
    return _fit(out, "kernels")


def diff(profiles: Profiles, base: str, new: str, by: str = "op", top: int = 10) -> dict:
    """How ``new`` differs from ``base`` per step, as ``pyprof diff BASE NEW --by BY --jsonl`` prints it: the
    runs, the steps (the step time's change split into kernel, copy and idle time), the rows that changed most
    and what only one run ran."""
    from pyprof.diff.compare import compare
    from pyprof.diff.runs import load

    if by not in ("op", "kernel", "line", "layer"):
        raise UsageError(f"by {by!r}: choose one of op, kernel, line, layer")
    # each side parsed once, as for the other answers (and kept for them)
    b = load("base", [profiles.get(base).source])
    n = load("new", [profiles.get(new).source])
    d = compare(b, n, by, top)
    out = {"base": base, "new": new, "by": by,
           "tables": [{"table": t.name, "title": t.title, "rows_total": len(t.rows), "rows": _rows(t, top),
                       "notes": t.notes[:5]} for t in d.tables],
           "cite": {"files": [base, new], "command": f"pyprof diff {_q(base)} {_q(new)} --by {by} --jsonl"}}
    return _fit(out)


# -- helpers --------------------------------------------------------------------------------------------------
def _q(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _prof(a: Analysed, options: str) -> str:
    """The ``pyprof prof`` command that prints the same rows: of the records file, or of the export parsed on the
    way (prof reads records only)."""
    if os.path.realpath(a.records) == os.path.realpath(a.path):
        return f"pyprof prof {options} {_q(a.path)}"
    return f"pyprof parse {_q(a.path)} | pyprof prof {options} -"


def _cite(a: Analysed, command: str) -> dict:
    return {"file": a.path, "gpu_activities": a.activities, "command": command}


def _rows(t: Table | None, top: int) -> list[dict]:
    if t is None:
        return []
    return [dict(zip(t.columns, r)) for r in t.rows[:max(top, 0)]]


def _cut(v):
    if isinstance(v, str) and len(v) > MAX_TEXT_CHARS:
        return v[:MAX_TEXT_CHARS] + f"...[{len(v) - MAX_TEXT_CHARS} more characters]"
    if isinstance(v, list):
        return [_cut(x) for x in v]
    if isinstance(v, dict):
        return {k: _cut(x) for k, x in v.items()}
    return v


def _fit(answer: dict, rows_key: str | None = None) -> dict:
    """``answer`` within MAX_ANSWER_CHARS of JSON: long texts cut, then rows left out from the end (of every list of
    rows, the longest first), saying so in ``left_out``."""
    answer = _cut(answer)
    lists = _row_lists(answer, rows_key)
    left = 0
    room = MAX_ANSWER_CHARS - _NOTE_CHARS  # for the left_out note
    while len(json.dumps(answer, separators=(",", ":"))) > room:
        longest = max(lists, key=len, default=None)
        if not longest:
            break
        longest.pop()
        left += 1
    if left:
        answer["left_out"] = f"{left} rows, to keep the answer under {MAX_ANSWER_CHARS} characters (ask for fewer)"
    return answer


def _row_lists(answer: dict, rows_key: str | None) -> list[list]:
    keys = (rows_key,) if rows_key else ("rows", "findings")
    out = [answer[k] for k in keys if isinstance(answer.get(k), list)]
    for t in answer.get("tables") or ():
        if isinstance(t.get("rows"), list):
            out.append(t["rows"])
    return out
