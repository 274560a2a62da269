"""Rows of the per-kernel table: records in, each kernel modelled and given its share of its op call, one row
out per record in input order. ``RowStream`` is the hot loop over raw lines (serial runs and ``--jobs``
workers); ``rows`` does the same for records already decoded (the views, the summaries).
"""
from __future__ import annotations

import io
from typing import IO, Container, Iterable, Sequence

from pyprof.common import BoundedDict, InputError

from pyprof.record import END_PREFIX, HEADER_PREFIX, OMITTABLE, SIDE_PREFIX
from pyprof.prof.table.columns import COLUMNS, record_keys
from pyprof.prof.load.contract import Ending, Header, check
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.model.modeller import Modeller, Result
from pyprof.prof.load.reader import DECODE_ERRORS, LEAN_ERRORS, legacy_loads, lean_loads, loads
from pyprof.prof.model.registry import Family
from pyprof.prof.model.results import Pending
from pyprof.prof.model.roofline import NO_ROOFLINE, Peaks, Roofline, at_duration, roofline, time_at_peaks

_EMPTY_LINES = frozenset({b"", b"\r", b"\n", b"\r\n"})
_PARSE_LINE = b'{"pyprof_'  # the start of parse's end, header and side lines
assert all(p.startswith(_PARSE_LINE) for p in (END_PREFIX, HEADER_PREFIX, SIDE_PREFIX))
BATCH = 2048  # rows handed to the format at a time
COMMIT_BATCHES = 32  # a spooling output (the CLI's) is written out every 64k rows


def rows(records: Iterable[tuple[int, dict]], modeller: Modeller, peaks: Peaks | None, need_roofline: bool,
         coverage: Coverage, path: str = "<input>",
         counted: Container[int] | None = None) -> Iterable[tuple[int, dict, Result, Roofline]]:
    """(idx, record, model result, Roofline) for each ``(line number, record)``, in input order.

    A kernel's result is its share of its op call, so a record comes out once its call is closed: at most
    WINDOW records later. ``modeller`` should be made with ``share=True`` (without, each record gets the
    record-by-record answer of ``Modeller.model``). ``counted``: the idx whose records count in ``coverage``
    (all by default; a worker of the views' pass replays records around its own). Raises InputError naming
    ``path`` and the line of a field of a wrong type.
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
                if counted is None or first + k in counted:
                    add(dur, m)
                r = roofline(m.flops, m.bytes, dur, for_gpu(d.get("gpu")), m.dtype, m.tc) \
                    if need_roofline and m.family != Family.TRANSFER else NO_ROOFLINE
            except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
                raise InputError(path, f"line {ln}: a record field has an unexpected type ({first_line(e)})") \
                    from None
            yield first + k, d, m, r

    for idx, (lineno, d) in enumerate(records):
        try:
            held.append([lineno, d, model(d, lineno, idx)])
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
            raise InputError(path, f"line {lineno}: a record field has an unexpected type ({first_line(e)})") \
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


#: The keys a schema-3 line may leave out that a row reads, with a default other than None: (key, default,
#: factory of a fresh copy for a list or dict). Only those are put back on the hot path: the model, the
#: roofline and the columns read a record with ``d.get``, which gives None for an absent key anyway, and
#: no key outside these is read at all (putting back all of them cost a dozen dict stores and a few fresh
#: lists a row).
def omitted_read(keys: Container[str]) -> tuple:
    """The (key, default, fresh copy's factory) of each of ``keys`` that a schema-3 line may leave out at a
    default other than None, for RowStream to put back."""
    return tuple((k, v, type(v) if type(v) in (list, dict) else None) for k, v in OMITTABLE.items()
                 if v is not None and k in keys)


#: The model's keys (the duration among them), the GPU name (roofline) and every column's.
_OMITTED_READ = omitted_read({*Modeller.RECORD_KEYS, "gpu", *record_keys(list(COLUMNS))})


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
    --jobs worker reads lines before and after its chunk). ``peak_times``: the results' times at their GPU's
    peaks, from an earlier stream of the same run (each entry keeps its result alive: an id names one result)."""

    def __init__(self, modeller: Modeller, row, peaks: Peaks, need_roofline: bool, coverage: Coverage, lean=None,
                 keep: tuple[int, int | None] = (0, None), omitted: tuple | None = None,
                 peak_times: BoundedDict | None = None) -> None:
        self.modeller, self.row, self.peaks, self.need_roofline = modeller, row, peaks, need_roofline
        self.coverage, self.lean = coverage, lean
        self.omitted = _OMITTED_READ if omitted is None else omitted  # (omitted_read) of the keys ``row`` reads
        self.lo, self.hi = keep
        self.ending = Ending("")  # named at the first feed: whether the input ended as parse ends its records
        self.held: list = []  # a row per record from index ``first`` on (None for a line of spaces)
        self.first = 0
        self.spaces = False  # ``held`` has a None
        # id(result) -> (GPU name, roofline?, time at its peaks, result); a --jobs worker passes its own, which
        # outlives each chunk's stream: its results are the same from chunk to chunk (the Modeller caches them)
        self.peak_times = BoundedDict(1 << 16) if peak_times is None else peak_times

    def feed(self, lines: Sequence[bytes], path: str, lineno: int, idx: int, count: bool = True) -> tuple[int, int]:
        """The hot loop: decode, model and make the rows of a run of input lines.

        ``lineno`` is the number of lines before them, ``idx`` the number of records before them; ``count``:
        whether they count in the coverage. Returns (lines consumed, records produced). Raises InputError for
        a malformed line."""
        # A line the first decoder refuses: decoded whole (what lean decoding refused), else read as a legacy line.
        self.ending.path = path
        lean = self.lean
        decode, errors, fallback = (lean, LEAN_ERRORS, _whole) if lean is not None else (loads, DECODE_ERRORS,
                                                                                           legacy_loads)
        model, row = self.modeller.model, self.row
        if not self.held:
            self.first = idx
        # Coverage is tallied per distinct model result (a few hundred in a run: formulas' results are cached)
        # and added up once per batch: a Coverage.add call per row costs more than the rest of the bookkeeping.
        tally: dict = {}  # id(result) -> [result, kernels, ns, *peak_times' entry]
        peak_times = self.peak_times
        append = self.held.append
        n0 = idx
        ending = self.ending
        omitted = self.omitted
        for line in lines:
            lineno += 1
            if line[:9] == _PARSE_LINE:  # one test per record line for parse's three other kinds of line
                if line[:14] == END_PREFIX:  # parse's end line: no row; it keeps an index as every non-empty line
                    ending.end()
                    append(None)
                    self.spaces = True
                    idx += 1
                    continue
                if line[:17] == HEADER_PREFIX:  # parse's header line: no row and no index (the records' idx are
                    Header().read(line, path, lineno)  # their order among the records, as before schema 3 wrote
                    ending.header()  # a header); a newer schema is refused here
                    continue
                if line[:15] == SIDE_PREFIX:  # a side line (memory events): no row and no index
                    continue
            try:
                d = decode(line)
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
            for k, default, fresh in omitted:  # a schema-3 line leaves a key out at its default
                if k not in d:
                    d[k] = fresh() if fresh is not None else default
            try:  # _measure, inlined: this loop runs once per kernel of the input
                m = model(d, lineno, idx, line)
                dur = d.get("kDuration") or 0
                if type(m) is Pending:  # its share replaces it when its call closes: its row is made then
                    dur + 0  # a duration of the wrong type is reported here, with its line
                    append(None)
                    idx += 1
                    continue
                # The tally keeps, with the counts, whether the result has a roofline and the time its work
                # takes at its GPU's peaks (from ``peak_times``): each row then only divides by its duration.
                t = tally.get(id(m))
                gpu = d.get("gpu")
                if t is None:
                    t = tally[id(m)] = [m, 1, dur, *(peak_times.get(id(m)) or self._peak_time(m, gpu))]
                else:
                    t[1] += 1
                    t[2] += dur
                if t[4] and t[3] != gpu:  # the same result on another GPU (several in one input)
                    t[3:] = self._peak_time(m, gpu)
                append(row(idx, d, m, at_duration(m.flops, m.bytes, dur, t[5]) if t[4] else NO_ROOFLINE))
            except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
                if count:
                    _add_tally(self.coverage, tally)
                raise InputError(path, f"line {lineno}: a record field has an unexpected type ({first_line(e)})") \
                    from None
            idx += 1
        if count:
            _add_tally(self.coverage, tally)
        return len(lines), idx - n0

    def _peak_time(self, m: Result, gpu) -> tuple:
        """(GPU name, whether result ``m`` has a roofline, the time its work takes at that GPU's peaks, ``m``),
        kept in ``peak_times``."""
        roof = self.need_roofline and m.family != Family.TRANSFER
        # m is kept with them: alive, its id names no other result
        t = (gpu, roof, time_at_peaks(m.flops, m.bytes, self.peaks.for_gpu(gpu), m.dtype, m.tc) if roof else None, m)
        self.peak_times.add(id(m), t)
        return t

    def ready(self, line: int | None) -> list:
        """Settle the op calls (those more than WINDOW lines before ``line``, or all at the end of the input:
        None), remake their rows, and return the rows that can no longer change, in input order."""
        first, held, cov, row, lo, hi = self.first, self.held, self.coverage, self.row, self.lo, self.hi
        need_roofline, for_gpu = self.need_roofline, self.peaks.for_gpu
        for idx, d, given, m in self.modeller.settle(line):  # share.Fix
            dur = d.get("kDuration") or 0
            r = roofline(m.flops, m.bytes, dur, for_gpu(d.get("gpu")), m.dtype, m.tc) \
                if need_roofline and m.family != Family.TRANSFER else NO_ROOFLINE
            held[idx - first] = row(idx, d, m, r)
            if idx >= lo and (hi is None or idx < hi):
                if type(given) is Pending:  # never counted
                    cov.add(dur, m)
                else:
                    cov.swap(dur, given, m)
        oldest = None if line is None else self.modeller.oldest_open()
        upto = len(held) if oldest is None else oldest - first
        lo = max(0, lo - first)
        hi = upto if hi is None else max(lo, min(upto, hi - first))
        out = held[lo:hi] if lo or hi != upto else held[:upto]
        del held[:upto]
        self.first = first + upto
        if self.spaces:
            out = [x for x in out if x is not None]
            self.spaces = None in held
        return out


def stream_rows(stream: IO[bytes], path: str, rows_: RowStream, write, commit=None) -> None:
    """Feed every line of a binary stream to ``rows_``, handing its rows to ``write`` as they are ready (a list
    each time), in input order; ``commit()``, when given, every COMMIT_BATCHES blocks read (a spooling output
    written out). Raises InputError for a malformed line, or an input cut short."""
    lineno = idx = n_blocks = 0
    for lines in line_blocks(stream):
        n_lines, n_records = rows_.feed(lines, path, lineno, idx)
        lineno += n_lines
        idx += n_records
        write(rows_.ready(lineno))
        n_blocks += 1
        if commit is not None and n_blocks % COMMIT_BATCHES == 0:
            commit()
    write(rows_.ready(None))
    rows_.ending.path = path  # named here too: an input with no line was never fed
    rows_.ending.done()


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
        return loads(line)
    except DECODE_ERRORS:
        return legacy_loads(line, path, lineno)


def _add_tally(coverage: Coverage, tally: dict) -> None:
    for m, kernels, ns, *_ in tally.values():
        coverage.add(ns, m, kernels)


def first_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def line_blocks(stream: IO[bytes], block_bytes: int = 1 << 20) -> Iterable[list]:
    """Lists of whole lines, each with its newline (the last line of the input may have none), read in large
    blocks: one read and one C-level split per block instead of one readline call per line. BytesIO's
    ``readlines`` finds each line's end with memchr, where ``bytes.split`` looks at every byte in turn: on
    records of a few kB a line, half the cost of splitting."""
    rest = b""
    read = getattr(stream, "read1", stream.read)
    while True:
        block = read(block_bytes)
        if not block:
            if rest:
                yield [rest]
            return
        lines = io.BytesIO(rest + block if rest else block).readlines()
        rest = lines.pop() if lines[-1][-1:] != b"\n" else b""
        yield lines
