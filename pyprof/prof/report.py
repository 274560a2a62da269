"""The prof pipeline: records in, one row per kernel (or a summary) out, and the coverage report.

``run`` is what the CLI calls; it is importable and takes streams, so tests pass ``io`` objects.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Iterable, Sequence

from pyprof.common import END_PREFIX, InputError
from pyprof.prof.columns import COLUMNS, ROOFLINE_COLUMNS, compile_row, record_keys
from pyprof.prof.model import Modeller, Result
from pyprof.prof.results import Pending
from pyprof.prof.output import FORMATS
from pyprof.prof.contract import Ending, check, check_file_ending
from pyprof.prof.reader import _DECODE_ERRORS, LEAN_ERRORS, _legacy, _loads, lean_loads
from pyprof.prof.registry import COUNTED_FAMILIES
from pyprof.prof.roofline import Peaks, roofline

_NO_ROOF = (None, None, None, None)
_EMPTY_LINES = frozenset({b"", b"\r", b"\n", b"\r\n"})
BATCH = 2048  # rows handed to the format at a time
COMMIT_BATCHES = 32  # a spooling output (the CLI's) is written out every 64k rows


@dataclass
class Coverage:
    """What share of kernel time got modelled numbers, and why the rest did not."""

    kernels: int = 0
    time_ns: int = 0
    own_ns: int = 0  # the kernel carries its call's numbers
    elsewhere_ns: int = 0  # another kernel of the same call carries them
    flops: int = 0
    counted_flops: int = 0  # GEMM/conv/attention: comparable with torch.utils.flop_counter
    bytes: int = 0
    reasons: dict = field(default_factory=dict)  # reason -> ns

    def add(self, dur: int, m: Result, kernels: int = 1) -> None:
        """Count ``kernels`` kernels that all got result ``m`` and took ``dur`` ns together."""
        self.kernels += kernels
        self.time_ns += dur
        if m.flops is not None or m.bytes is not None:
            self.own_ns += dur
            if m.flops:
                self.flops += m.flops * kernels
                if m.family in COUNTED_FAMILIES:
                    self.counted_flops += m.flops * kernels
            if m.bytes:
                self.bytes += m.bytes * kernels
        elif m.reason and (m.reason.startswith("counted on") or m.reason.startswith("helper kernel")):
            self.elsewhere_ns += dur
        else:
            r = m.reason or "not modelled"
            if r.startswith("no formula for ") or r.startswith("no op"):
                pass
            elif m.family:
                r = f"{r} ({m.family})"
            self.reasons[r] = self.reasons.get(r, 0) + dur

    def swap(self, dur: int, given: Result, final: Result) -> None:
        """A kernel counted with ``given`` that has its share ``final`` now (the same kernel, the same time)."""
        self.add(-dur, given, -1)
        self.add(dur, final)

    def merge(self, other: "Coverage") -> None:
        """Add another coverage (a worker's) into this one."""
        for k in ("kernels", "time_ns", "own_ns", "elsewhere_ns", "flops", "counted_flops", "bytes"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for r, ns in other.reasons.items():
            self.reasons[r] = self.reasons.get(r, 0) + ns

    def text(self) -> str:
        """The end-of-run lines for stderr."""
        t = self.time_ns or 1
        lines = [f"pyprof.prof: {self.kernels} kernels, {self.time_ns / 1e6:.3f} ms GPU time; FLOPs/bytes modelled "
                 f"for {100 * (self.own_ns + self.elsewhere_ns) / t:.1f}% of it ({100 * self.own_ns / t:.1f}% on the "
                 f"kernel itself, {100 * self.elsewhere_ns / t:.1f}% on another kernel of the same op call)",
                 f"pyprof.prof: total {self.flops} FLOPs, {self.bytes} bytes; GEMM/conv/attention FLOPs (comparable "
                 f"with torch.utils.flop_counter) {self.counted_flops}"]
        if self.reasons:
            top = sorted(self.reasons.items(), key=lambda kv: -kv[1])[:5]
            lines.append("pyprof.prof: not modelled: " + "; ".join(f"{r} {100 * ns / t:.1f}%" for r, ns in top))
        return "\n".join(lines)


def rows(records: Iterable[tuple[int, dict]], modeller: Modeller, peaks: Peaks | None, need_roofline: bool,
         coverage: Coverage, path: str = "<input>") -> Iterable[tuple[int, dict, Result, tuple]]:
    """(idx, record, model result, roofline tuple) for each ``(line number, record)``, in input order.

    A kernel's result is its share of its op call, so a record comes out once its call is closed: at most
    WINDOW records later. ``modeller`` should be made with ``share=True`` (without, each record gets the
    record-by-record answer of ``Modeller.model``). Raises InputError naming ``path`` and the line of a field of
    a wrong type.
    """
    model, settle, oldest = modeller.model, modeller.settle, modeller.oldest_open
    for_gpu = peaks.for_gpu if peaks is not None else (lambda _g: None)
    add = coverage.add
    held: list = []  # [line number, record, result] of the records not yet given out, from index ``first``
    first = 0
    lineno = 0

    def out(upto: int):
        for k in range(upto - first):
            ln, d, m = held[k]
            try:
                dur = d.get("kDuration") or 0
                add(dur, m)
                r = roofline(m.flops, m.bytes, dur, for_gpu(d.get("gpu")), m.dtype, m.tc) \
                    if need_roofline and m.family != "transfer" else _NO_ROOF
            except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
                raise InputError(path, f"line {ln}: a record field has an unexpected type ({_first_line(e)})") \
                    from None
            yield first + k, d, m, r

    for idx, (lineno, d) in enumerate(records):
        try:
            held.append([lineno, d, model(d, lineno, idx)])
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
            raise InputError(path, f"line {lineno}: a record field has an unexpected type ({_first_line(e)})") \
                from None
        if len(held) >= BATCH:
            for fix in settle(lineno):
                held[fix.idx - first][2] = fix.final
            o = oldest()
            upto = first + len(held) if o is None else o
            yield from out(upto)
            del held[:upto - first]
            first = upto
    for fix in settle(None):
        held[fix.idx - first][2] = fix.final
    yield from out(first + len(held))


def lean_decoder(columns: Sequence[str]):
    """reader.lean_loads for what the rows of these columns read: the model's keys (the duration among them:
    every column's values are the same whatever other columns are selected), the GPU name (roofline) and the
    columns' own keys. None without msgspec."""
    return lean_loads(sorted({*Modeller.RECORD_KEYS, "gpu", *record_keys(list(columns))}))


class RowStream:
    """The rows of a run of input lines, in input order, each handed out once its op call is closed.

    A kernel's share of its call's FLOPs and bytes depends on the call's later kernels: rows are made as the
    records come, with the Modeller's first answer, and held (at most WINDOW records behind the call in
    progress that started earliest); ``ready`` remakes the rows of the calls closed since, and hands out
    those no open call can change. ``keep``: the record indices [lo, hi) whose rows and coverage count (a
    --jobs worker reads lines before and after its chunk)."""

    def __init__(self, modeller: Modeller, row, peaks: Peaks, need_roofline: bool, coverage: Coverage, lean=None,
                 keep: tuple[int, int | None] = (0, None)) -> None:
        self.modeller, self.row, self.peaks, self.need_roofline = modeller, row, peaks, need_roofline
        self.coverage, self.lean = coverage, lean
        self.lo, self.hi = keep
        self.ending = Ending("")  # named at the first feed: whether the input ended as parse ends its records
        self.held: list = []  # a row per record from index ``first`` on (None for a line of spaces)
        self.first = 0
        self.spaces = False  # ``held`` has a None

    def feed(self, lines: Sequence[bytes], path: str, lineno: int, idx: int, count: bool = True) -> tuple[int, int]:
        """The hot loop: decode, model and make the rows of a run of input lines.

        ``lineno`` is the number of lines before them, ``idx`` the number of records before them; ``count``:
        whether they count in the coverage. Returns (lines consumed, records produced). Raises InputError for
        a malformed line."""
        # A line the first decoder refuses: decoded whole (what lean decoding refused), else read as a legacy line.
        self.ending.path = path
        lean = self.lean
        loads, errors, fallback = (lean, LEAN_ERRORS, _whole) if lean is not None else (_loads, _DECODE_ERRORS, _legacy)
        model, for_gpu, row, need_roofline = self.modeller.model, self.peaks.for_gpu, self.row, self.need_roofline
        if not self.held:
            self.first = idx
        # Coverage is tallied per distinct model result (a few hundred in a run: formulas' results are cached)
        # and added up once per batch: a Coverage.add call per row costs more than the rest of the bookkeeping.
        tally: dict = {}  # id(result) -> [result, kernels, ns]
        append = self.held.append
        n0 = idx
        ending = self.ending
        for line in lines:
            lineno += 1
            if line[:14] == END_PREFIX:  # parse's end line: no row; it keeps an index as every non-empty line
                ending.end()
                append(None)
                self.spaces = True
                idx += 1
                continue
            try:
                d = loads(line)
            except errors:
                if not line.strip():
                    if line not in _EMPTY_LINES:
                        append(None)  # a line of spaces keeps its index (empty lines do not), as parallel.py counts
                        self.spaces = True
                        idx += 1
                    continue
                d = fallback(line, path, lineno)
                if type(d) is dict and lean is not None:
                    check(d, path, lineno)  # what the typed lean decoder refused: say which key, or take it
            else:
                if lean is None and type(d) is dict:  # no typed decoder (no msgspec): every record checked here
                    check(d, path, lineno)
            if type(d) is not dict:
                raise InputError(path, f"line {lineno}: expected one record object per line, got {type(d).__name__}")
            if not ending.required or ending.ended:
                ending.record(d, lineno)
            try:  # _measure, inlined: this loop runs once per kernel of the input
                m = model(d, lineno, idx, line)
                dur = d.get("kDuration") or 0
                if type(m) is Pending:  # its share replaces it when its call closes: its row is made then
                    dur + 0  # a duration of the wrong type is reported here, with its line
                    append(None)
                    idx += 1
                    continue
                t = tally.get(id(m))
                if t is None:
                    tally[id(m)] = [m, 1, dur]
                else:
                    t[1] += 1
                    t[2] += dur
                r = roofline(m.flops, m.bytes, dur, for_gpu(d.get("gpu")), m.dtype, m.tc) \
                    if need_roofline and m.family != "transfer" else _NO_ROOF
                append(row(idx, d, m, r))
            except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
                if count:
                    _add_tally(self.coverage, tally)
                raise InputError(path, f"line {lineno}: a record field has an unexpected type ({_first_line(e)})") \
                    from None
            idx += 1
        if count:
            _add_tally(self.coverage, tally)
        return len(lines), idx - n0

    def ready(self, line: int | None) -> list:
        """Settle the op calls (those more than WINDOW lines before ``line``, or all at the end of the input:
        None), remake their rows, and return the rows that can no longer change, in input order."""
        first, held, cov = self.first, self.held, self.coverage
        for fix in self.modeller.settle(line):
            d, m = fix.record, fix.final
            dur = d.get("kDuration") or 0
            r = roofline(m.flops, m.bytes, dur, self.peaks.for_gpu(d.get("gpu")), m.dtype, m.tc) \
                if self.need_roofline and m.family != "transfer" else _NO_ROOF
            held[fix.idx - first] = self.row(fix.idx, d, m, r)
            if fix.idx >= self.lo and (self.hi is None or fix.idx < self.hi):
                if type(fix.given) is Pending:  # never counted
                    cov.add(dur, m)
                else:
                    cov.swap(dur, fix.given, m)
        oldest = None if line is None else self.modeller.oldest_open()
        upto = len(held) if oldest is None else oldest - first
        lo = max(0, self.lo - first)
        hi = upto if self.hi is None else max(lo, min(upto, self.hi - first))
        out = held[lo:hi] if lo or hi != upto else held[:upto]
        del held[:upto]
        self.first = first + upto
        if self.spaces:
            out = [x for x in out if x is not None]
            self.spaces = None in held
        return out


def process_lines(lines: Sequence[bytes], path: str, lineno: int, idx: int, modeller: Modeller, row,
                  peaks: Peaks, need_roofline: bool, coverage: Coverage, lean=None) -> tuple[list, int, int]:
    """Every row of a run of input lines that is the whole input (a RowStream fed once; see it for the
    arguments). Returns (row tuples, lines consumed, records produced). Raises InputError for a malformed line.
    """
    stream = RowStream(modeller, row, peaks, need_roofline, coverage, lean)
    n_lines, n_records = stream.feed(lines, path, lineno, idx)
    return stream.ready(None), n_lines, n_records


def _whole(line: bytes, path: str, lineno: int):
    """A line decoded whole: JSON, else an original PyProf dict line (raises InputError if neither)."""
    try:
        return _loads(line)
    except _DECODE_ERRORS:
        return _legacy(line, path, lineno)


def _add_tally(coverage: Coverage, tally: dict) -> None:
    for m, kernels, ns in tally.values():
        coverage.add(ns, m, kernels)


def run_stream(stream: IO[bytes], path: str, out: IO[str], columns: Sequence[str], fmt: str = "space",
               width: int = 0, peaks: Peaks | None = None, header: bool = True, jobs: int = 1) -> Coverage:
    """Read JSON Lines / PyProf dict lines from a binary stream and write one row per record.

    ``jobs`` > 1 spreads the work over processes (streaming formats only; pyprof.prof.parallel).
    Returns the coverage. Raises InputError naming the line of a malformed record.
    """
    check_file_ending(stream, path)  # a file cut short is refused before any row goes out
    cls = FORMATS[fmt]
    writer = cls(out, columns, [COLUMNS[c].header for c in columns], width)
    if header:
        writer.header()
    peaks = peaks or Peaks()
    if jobs > 1 and fmt != "columns":
        from pyprof.prof import parallel

        if parallel.available():
            coverage = parallel.run_parallel(stream, path, out, writer, list(columns), fmt, peaks, jobs)
            writer.close()
            return coverage
    row = compile_row(list(columns), raw=cls.raw, short_trace=(fmt == "columns"))
    coverage = Coverage()
    need_roof = bool(ROOFLINE_COLUMNS.intersection(columns))
    rows_ = RowStream(Modeller(share=True), row, peaks, need_roof, coverage, lean_decoder(columns))
    with no_cyclic_gc():
        _serial(stream, path, writer, rows_, getattr(out, "commit", None), fmt)
    writer.close()
    return coverage


@contextmanager
def no_cyclic_gc():
    """Records are trees (no cycles): the cyclic collector only costs time on millions of short-lived dicts."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _serial(stream: IO[bytes], path: str, writer, rows_: RowStream, commit, fmt: str) -> None:
    lineno = idx = n_batches = 0
    for lines in _line_blocks(stream):
        n_lines, n_recs = rows_.feed(lines, path, lineno, idx)
        lineno += n_lines
        idx += n_recs
        writer.rows(rows_.ready(lineno))
        n_batches += 1
        if commit is not None and n_batches % COMMIT_BATCHES == 0 and fmt != "columns":
            commit()
    writer.rows(rows_.ready(None))
    rows_.ending.done()


def _first_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _line_blocks(stream: IO[bytes], block_bytes: int = 1 << 20) -> Iterable[list]:
    """Lists of whole lines (with their newlines) read in large blocks: one read and one C-level split per
    block instead of one readline call per line."""
    rest = b""
    read = getattr(stream, "read1", stream.read)
    while True:
        block = read(block_bytes)
        if not block:
            if rest:
                yield [rest]
            return
        data = rest + block if rest else block
        lines = data.split(b"\n")
        rest = lines.pop()
        yield lines


def run(records: Iterable[tuple[int, dict]], out: IO[str], columns: Sequence[str], fmt: str = "space",
        width: int = 0, peaks: Peaks | None = None, header: bool = True) -> Coverage:
    """Write one row per already-decoded record (``(lineno, dict)`` pairs, as iter_records yields) in format
    ``fmt``; return the coverage (the caller reports it)."""
    cls = FORMATS[fmt]
    writer = cls(out, columns, [COLUMNS[c].header for c in columns], width)
    row = compile_row(list(columns), raw=cls.raw, short_trace=(fmt == "columns"))
    coverage = Coverage()
    need_roof = bool(ROOFLINE_COLUMNS.intersection(columns))
    if header:
        writer.header()
    batch: list = []
    for i, d, m, r in rows(records, Modeller(share=True), peaks or Peaks(), need_roof, coverage):
        batch.append(row(i, d, m, r))
        if len(batch) >= BATCH:
            writer.rows(batch)
            batch.clear()
    writer.rows(batch)
    writer.close()
    return coverage
