"""Two captures of the same steps joined: attribution from one, times from the other.

Markers cost host time (docs/capture.md): under ``pyprof.init()`` and nsys a step's CPU side ran 2.5 times
longer than without a profiler, while its kernels barely moved. So the window is captured twice: once with full
markers (the attribution pass: op, call site, shapes) and once with the lightest capture that still records GPU
activity (the timing pass: nsys ``-t cuda``, or the PyTorch profiler with CUDA activity only). Both are parsed as
any input; this module pairs their activities and writes the timing pass's activities carrying the attribution
pass's attribution:

    pyprof parse full.sqlite --timing light.sqlite > joined.dict

Pairing: a training step repeats its kernel sequence, so the activities are split by step (ProfilerStep ranges
where both passes have as many, else the whole window), then by device and stream, and each such sequence of the
attribution pass is aligned with its counterpart by difflib.SequenceMatcher on a key that the two profilers
write alike: a kernel's short name and launch configuration, a copy's direction and size, a memset's size (long
names and copy names are spelled differently by nsys and the PyTorch profiler). What does not align is counted,
with its share of GPU time, in the ``join`` side line and parse's summary; inputs of which less than half the
kernels align are refused as not the same program.
"""
from __future__ import annotations

import bisect
import json
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Iterator

from pyprof.common import InputError
from pyprof.record import END_KEY, FIELDS, HEADER_KEY, SIDE_KEY, Stage, end_line
from pyprof.parse.attribute.correlate import Stats

#: The record's keys that come from the timing pass: what the reader takes from the activity, its device and its
#: launch call, and the kernel's duration (the writer's, from the activity's end). Every other key (the
#: attribution, the kernel's index in its op call) comes from the attribution pass. ``host_ns`` is an attribution
#: field but a time: the timing pass's own value (null where it has no op ranges), never the marker-inflated one.
TIMING_KEYS = frozenset(f.name for f in FIELDS if f.stage in (Stage.ACTIVITY, Stage.DEVICE, Stage.LAUNCH)) | {
    "kDuration", "host_ns"}
#: Below this share of either pass's kernels aligned, the two inputs are not captures of one program.
MIN_MATCHED_SHARE = 0.5
#: How many of the most frequent unmatched names the join line and the summary name.
NAMED_UNMATCHED = 5
SIDE_KIND = "join"
#: Where a record line's attribution begins: its first attribution key, written on every line (Field.always). The
#: timing pass's part before it and the attribution pass's part from it make the joined line without decoding
#: either's attribution (op arguments are most of a line: the join would spend its time in json otherwise).
_FIRST = next(f for f in FIELDS if f.stage is Stage.ATTRIBUTION)
_SPLIT = f',"{_FIRST.name}":'
_AFTER = {f.name for f in FIELDS[FIELDS.index(_FIRST):]}
if not _FIRST.always or _AFTER & TIMING_KEYS != {"host_ns"}:  # the layout the fast path relies on
    raise RuntimeError("pyprof.parse.side.join: the record's attribution keys no longer follow its activity keys")
_HOST = ',"host_ns":'


@dataclass
class Pass:
    """One parsed input: its header, its record lines (as written: lean), its side lines (as written) and its
    steps (``pid`` -> ProfilerStep intervals ``[(start_ns, end_ns)]`` in time order). ``records`` holds each
    line's activity keys decoded (what pairing reads); ``split`` where its attribution begins (-1: decode it
    whole)."""

    path: str
    format: str  # the reader's (Source.format)
    header: dict
    lines: list[str]
    side: list[str]
    steps: dict
    stats: Stats
    records: list[dict] = field(init=False)
    split: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.records, self.split = [], []
        for line in self.lines:
            i = line.find(_SPLIT)
            self.records.append(json.loads(line if i < 0 else line[:i] + "}"))
            self.split.append(i)


@dataclass
class JoinStats:
    """What the join paired and what it did not: counts, GPU time (ns) and the most frequent unmatched names of
    each pass (``attribution_*``: records of the attribution pass with no timing activity, whose attribution is
    lost; ``timing_*``: timing activities with no attribution record, written with the timing pass's own)."""

    attribution: str
    timing: str
    steps_by: str  # "ProfilerStep" or "window"
    steps: int  # steps paired (0: the whole window)
    steps_note: str  # why the whole window, where it is
    names_by: str = "short name"  # which kernel name paired: "full name" where both passes spell them alike
    formats: tuple = ("", "")  # the readers of the attribution and the timing pass (Source.format)
    matched: int = 0
    matched_kernels: int = 0
    attribution_records: int = 0
    attribution_kernels: int = 0
    attribution_ns: int = 0
    attribution_unmatched: int = 0
    attribution_unmatched_ns: int = 0
    timing_records: int = 0
    timing_kernels: int = 0
    timing_ns: int = 0
    timing_unmatched: int = 0
    timing_unmatched_ns: int = 0
    attribution_unmatched_names: Counter = field(default_factory=Counter)
    timing_unmatched_names: Counter = field(default_factory=Counter)
    left_out: list = field(default_factory=list)  # side lines of the attribution pass not written, and why

    def side_line(self) -> str:
        """The ``join`` side line (no newline): what was paired and what was not."""
        body = {SIDE_KEY: SIDE_KIND, "attribution": self.attribution, "timing": self.timing,
                "attribution_format": self.formats[0], "timing_format": self.formats[1],
                "times_from": "timing", "names_by": self.names_by, "steps_by": self.steps_by, "steps": self.steps}
        if self.steps_note:
            body["steps_note"] = self.steps_note
        for name in ("matched", "attribution_records", "attribution_ns", "attribution_unmatched",
                     "attribution_unmatched_ns", "timing_records", "timing_ns", "timing_unmatched",
                     "timing_unmatched_ns"):
            body[name] = getattr(self, name)
        body["attribution_unmatched_names"] = dict(self.attribution_unmatched_names.most_common(NAMED_UNMATCHED))
        body["timing_unmatched_names"] = dict(self.timing_unmatched_names.most_common(NAMED_UNMATCHED))
        body["left_out"] = self.left_out
        return json.dumps(body, separators=(",", ":"))

    def summary(self) -> str:
        """One sentence for parse's summary: where the times come from, and what did not pair."""
        steps = (f"{self.steps} step{'s' * (self.steps != 1)} paired by ProfilerStep ranges"
                 if self.steps_by == "ProfilerStep"
                 else f"the whole window paired ({self.steps_note})")
        line = (f"times from {self.timing}: {self.matched} of its {self.timing_records} activities paired with "
                f"{self.attribution}'s by kernel {self.names_by} and launch configuration; {steps}")
        line += "; " + _unmatched("timing activities without attribution", self.timing_unmatched,
                                  self.timing_unmatched_ns, self.timing_ns, self.timing_unmatched_names)
        line += "; " + _unmatched("attribution records with no timing activity (left out)",
                                  self.attribution_unmatched, self.attribution_unmatched_ns, self.attribution_ns,
                                  self.attribution_unmatched_names)
        if self.left_out:
            line += "; left out: " + ", ".join(self.left_out)
        return line


def _unmatched(what: str, count: int, ns: int, total_ns: int, names: Counter) -> str:
    if not count:
        return f"0 {what}"
    share = 100.0 * ns / total_ns if total_ns else 0.0
    share_text = f"{share:.1f}%" if share >= 0.1 or not ns else "<0.1%"
    top = ", ".join(f"{n} x{c}" for n, c in names.most_common(NAMED_UNMATCHED))
    return f"{count} {what}, {share_text} of its GPU time ({top})"


def read_pass(src, worker: bool | None = None, raw_markers: bool = False) -> Pass:
    """Parse an opened source (pyprof.parse.open_source) into a Pass, reading every line into memory (the join
    needs both passes whole). The caller closes the source."""
    from pyprof.parse.write.writer import lines

    out, stats = lines(src, worker, raw_markers)
    header: dict = {}
    records: list[str] = []
    side: list[str] = []
    steps: dict = {}
    for text in out:
        if text.startswith('{"' + SIDE_KEY):
            side.append(text)
            d = json.loads(text)
            if d.get(SIDE_KEY) == "host" and d.get("category") == "step":
                steps.setdefault(d.get("pid"), []).extend(zip(d["start_ns"], d["end_ns"]))
            continue
        if text.startswith('{"' + HEADER_KEY):
            header = json.loads(text)
        elif not text.startswith('{"' + END_KEY):
            records.append(text)
    for intervals in steps.values():
        intervals.sort()
    return Pass(src.path, src.format, header, records, side, steps, stats)


def join(full: Pass, light: Pass) -> tuple[Iterator[str], JoinStats]:
    """Pair ``light``'s activities (the timing pass) with ``full``'s records (the attribution pass). Returns (the
    output lines without newlines, made as they are consumed: ``light``'s header, one record per ``light``
    activity in its order, carrying the attribution of the ``full`` record paired with it, where one is,
    ``light``'s side lines, the ``join`` side line, the end line; the JoinStats, complete already). Raises
    InputError, before returning, where either has no GPU activity or where less than MIN_MATCHED_SHARE of
    either's kernels pair (not the same program)."""
    for p in (full, light):
        if not p.records:
            raise InputError(p.path, "no GPU activity: nothing to join")
    n_steps, note = _step_pairing(full, light)
    long_names = _long_names_alike(full, light)
    st = JoinStats(full.path, light.path, "ProfilerStep" if n_steps else "window", n_steps, note,
                   "full name" if long_names else "short name", (full.format, light.format))
    pairs = dict(_pairs(full, light, n_steps > 0, long_names))
    _count(st, full, light, pairs)
    _refuse_other_programs(st)
    kinds = Counter(json.loads(s).get(SIDE_KEY) for s in full.side)
    for kind in ("memory", "host", "window"):
        if kinds[kind]:  # on the attribution pass's clock, and inflated by its markers where they are times
            st.left_out.append(f"{full.path}'s {kind} lines: {kinds[kind]} (its clock; the timing pass's are kept)")
    return _lines(full, light, pairs, st), st


def _lines(full: Pass, light: Pass, pairs: dict, st: JoinStats) -> Iterator[str]:
    yield json.dumps(light.header or full.header, separators=(",", ":"))
    for j, line in enumerate(light.lines):
        i = pairs.get(j)
        yield line if i is None else _joined_line(full, i, light, j)
    yield from light.side
    yield st.side_line()
    yield end_line(len(light.lines))


def _joined_line(full: Pass, i: int, light: Pass, j: int) -> str:
    """The timing pass's line ``j`` with the attribution of the attribution pass's line ``i``: the one's activity
    part and the other's attribution part, ``host_ns`` the timing pass's."""
    a, t = full.lines[i], light.lines[j]
    fi, tj = full.split[i], light.split[j]
    if fi < 0 or tj < 0 or _HOST in t[tj:]:  # a line of another layout, or a timing pass with op ranges
        return json.dumps(_merged(json.loads(a), json.loads(t)), separators=(",", ":"))
    tail = a[fi:]
    k = tail.rfind(_HOST)  # no string holds it (a quote in a string is escaped), nor does a later key's value
    if k >= 0:
        end = k + len(_HOST)
        while tail[end] in "-0123456789":
            end += 1
        tail = tail[:k] + tail[end:]
    return t[:tj] + tail


def _step_pairing(full: Pass, light: Pass) -> tuple[int, str]:
    """(steps to pair, or 0 for the whole window; why the whole window)."""
    counts = []
    for p in (full, light):
        per_process = {len(v) for v in p.steps.values()}
        if not per_process:
            counts.append(None)
        elif len(per_process) > 1:
            return 0, f"the processes of {p.path} have different numbers of ProfilerStep ranges"
        else:
            counts.append(per_process.pop())
    missing = [p.path for p, c in zip((full, light), counts) if c is None]
    if missing:
        return 0, "no ProfilerStep ranges in " + " and ".join(missing) + ": the join needs step markers in both " \
                  "to pair step by step"
    if counts[0] != counts[1]:
        return 0, f"{counts[0]} ProfilerStep ranges in {full.path}, {counts[1]} in {light.path}"
    return counts[0], ""


def _long_names_alike(full: Pass, light: Pass) -> bool:
    """Whether the two passes spell kernels' full names alike: one reader read both (nsys and the PyTorch
    profiler demangle the same kernel differently, ``<(int)128, ...>`` against ``<128, ...>``) and at least half
    of the distinct full names of the one with fewer are in the other (not two versions of a tool that spell them
    differently). Where they do, full names pair: a short name alone takes a fused optimizer kernel for a foreach
    one of the same launch configuration."""
    if full.format != light.format:
        return False
    names = [{d.get("kLongName") for d in p.records if d.get("kind") == "kernel"} for p in (full, light)]
    fewer = min(names, key=len)
    return bool(fewer) and len(names[0] & names[1]) >= MIN_MATCHED_SHARE * len(fewer)


def _key(d: dict, long_names: bool) -> tuple:
    """What must be equal for two activities of the same program's same step to be the same work."""
    kind = d.get("kind")
    if kind == "kernel":
        name = d.get("kLongName") if long_names else d.get("kShortName")
        return kind, name, tuple(d.get("grid") or ()), tuple(d.get("block") or ())
    if kind == "memcpy":
        return kind, d.get("copy_kind"), d.get("bytes")
    return kind, d.get("bytes")


def _label(d: dict) -> str:
    kind = d.get("kind")
    if kind == "kernel":
        return d.get("kShortName") or "?"
    return f"{kind} {d.get('copy_kind') or ''}".rstrip() if kind == "memcpy" else kind


def _groups(p: Pass, by_step: bool) -> dict:
    """(step index or -1 outside every step, device) -> stream -> record indices in start order. A record belongs
    to the step its launch call started in (its GPU start where it has no launch call)."""
    out: dict = {}
    for i, d in enumerate(p.records):
        step = 0
        if by_step:
            intervals = p.steps.get(d.get("pid")) or next(iter(p.steps.values()))
            t = d.get("api_start_ns")
            t = d.get("start_ns", 0) if t is None else t
            k = bisect.bisect_right(intervals, (t, float("inf"))) - 1
            step = k if k >= 0 and t < intervals[k][1] else -1
        out.setdefault((step, d.get("device")), {}).setdefault(d.get("stream"), []).append(i)
    return out


def _stream_pairs(full: dict, light: dict) -> Iterator[tuple[list[int], list[int]]]:
    """The streams of one step and device paired: the same stream id first, then the rest in order of first use
    (a stream id is the same in two runs of a program only if it creates its streams in the same order)."""
    same = [s for s in full if s in light]
    for s in same:
        yield full[s], light[s]
    rest_f = sorted((v for s, v in full.items() if s not in light), key=lambda v: v[0])
    rest_l = sorted((v for s, v in light.items() if s not in full), key=lambda v: v[0])
    yield from zip(rest_f, rest_l)


def _pairs(full: Pass, light: Pass, by_step: bool, long_names: bool) -> Iterator[tuple[int, int]]:
    """(light index, full index) of every paired activity, by full kernel names where the passes spell them
    alike, else by short names."""
    gf, gl = _groups(full, by_step), _groups(light, by_step)
    for place, streams in gf.items():
        if place not in gl:
            continue
        for fi, li in _stream_pairs(streams, gl[place]):
            fk = [_key(full.records[i], long_names) for i in fi]
            lk = [_key(light.records[j], long_names) for j in li]
            # autojunk off: a step's commonest kernels (element-wise, memsets) are the ones it must not skip
            for a, b, size in SequenceMatcher(None, fk, lk, autojunk=False).get_matching_blocks():
                for n in range(size):
                    yield li[b + n], fi[a + n]


def _count(st: JoinStats, full: Pass, light: Pass, pairs: dict) -> None:
    paired_full = set(pairs.values())
    for side, p, paired in (("attribution", full, paired_full), ("timing", light, pairs.keys())):
        names: Counter = getattr(st, f"{side}_unmatched_names")
        records = kernels = total = unmatched = unmatched_ns = 0
        for i, d in enumerate(p.records):
            ns = d.get("kDuration") or 0
            records += 1
            kernels += d.get("kind") == "kernel"
            total += ns
            if i not in paired:
                unmatched += 1
                unmatched_ns += ns
                names[_label(d)] += 1
        setattr(st, f"{side}_records", records)
        setattr(st, f"{side}_kernels", kernels)
        setattr(st, f"{side}_ns", total)
        setattr(st, f"{side}_unmatched", unmatched)
        setattr(st, f"{side}_unmatched_ns", unmatched_ns)
    st.matched = len(pairs)
    st.matched_kernels = sum(light.records[j].get("kind") == "kernel" for j in pairs)


def _refuse_other_programs(st: JoinStats) -> None:
    for path, kernels in ((st.attribution, st.attribution_kernels), (st.timing, st.timing_kernels)):
        if kernels and st.matched_kernels < MIN_MATCHED_SHARE * kernels:
            raise InputError(st.timing, f"not the same program as {st.attribution}: {st.matched_kernels} of "
                             f"{kernels} kernels of {path} pair by kernel {st.names_by} and launch configuration "
                             f"(the join needs {MIN_MATCHED_SHARE:.0%} of each input's)")


def _merged(attributed: dict, timed: dict) -> dict:
    """The timing pass's activity with the attribution pass's attribution, keys in the record's order; a key a
    lean line leaves out (its default) stays out."""
    out = {}
    for f in FIELDS:
        src = timed if f.name in TIMING_KEYS else attributed
        if f.name in src:
            out[f.name] = src[f.name]
    return out
