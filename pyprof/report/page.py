"""The HTML report: one self-contained file (CSS, JavaScript and data inlined; nothing fetched, no server) that
renders the views' Tables as sortable tables with charts, and a timeline of the first trace events.

The page is data plus a small script: the Tables go in as JSON (``Table.to_dict``) and static/report.js draws
them, so what the page shows is exactly what the views computed. The timeline takes the Chrome trace events
of ``pyprof.report.perfetto.events`` (already capped by the caller) in a compact form.
"""
from __future__ import annotations

import html
import json
import math
from importlib import resources
from typing import IO, Iterable

import numpy as np
import orjson

from pyprof.common import bounded, printable
from pyprof.prof.tables import Table

#: Most timeline events embedded in a page: about 40 bytes each, so the page stays a few MB at most.
TIMELINE_CAP = 30000

# Shown on hover. Not the correlation id: unique per kernel, it would defeat the interning of tips (6 MB of
# tips for a 10k-event timeline with it, 0.3 MB without).
_TIP_KEYS = ("op", "dir", "forward op", "layer", "callsite", "shapes", "params", "flops", "bytes", "tensor cores",
             "kernel", "range")


def _asset(name: str) -> str:
    return resources.files("pyprof.report").joinpath("static", name).read_text(encoding="utf-8")


def json_text(obj) -> str:
    """Strict JSON text of ``obj`` (no NaN or Infinity: null, as orjson writes them)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    except orjson.JSONEncodeError:
        # An int beyond 64 bits (a FLOP total) or a string that is no valid UTF-8 (a lone surrogate, which a
        # legacy dict line can hold as '\ud800'): the standard encoder writes digits and \u escapes.
        return json.dumps(_finite(obj), separators=(",", ":"), allow_nan=False, default=str)


def _finite(obj):
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _bounded(obj):
    # Every string of the page's data cut as prof's text formats cut fields (output.MAX_FIELD_CHARS): a name of
    # megabytes would otherwise be in the page several times (table, chart, timeline name and tip).
    if isinstance(obj, str):
        return bounded(obj)
    if isinstance(obj, dict):
        return {k: _bounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_bounded(v) for v in obj]
    return obj


def embed_json(obj) -> str:
    """JSON text safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` become \\u escapes, so no string in
    the data (a kernel name like ``foo<bar></script>``, ``<!--``) can close the element or open a comment, and
    U+2028/U+2029 too (a script that took the text as a JavaScript literal would break its line there)."""
    text = json_text(obj)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


#: A tip's value longer than this is cut, saying how long it was: an optimizer's foreach call lists every parameter's
#: shape (52 of them on a small model), and a tip that covers half the screen hides the timeline it explains.
TIP_VALUE_CHARS = 160


#: A CPU range slice's ``args.times`` where its ends are the range's own push and pop (the Perfetto export writes
#: it; perfetto.RANGE_TIMES where they are drawn from the range's launches).
MEASURED_TIMES = "measured: the range's push to its pop"


def _tip(args: dict) -> str:
    lines = [f"{k}: {_tip_value(args[k])}" for k in _TIP_KEYS if k in args]
    if "times" in args:  # a CPU range's slice: whether its ends are measured or drawn
        lines.append("times: " + ("measured, push to pop" if _measured(args) else
                                  "drawn from its first launch to its last"))
    return "\n".join(lines)


def _measured(args: dict) -> bool:
    return args.get("times") == MEASURED_TIMES


def _tip_value(value) -> str:
    text = str(value)
    if len(text) <= TIP_VALUE_CHARS:
        return text
    more = f"... ({len(text):,} characters; the tables have it whole)"
    return text[:max(TIP_VALUE_CHARS - len(more), 20)] + more


def timeline(trace_events: Iterable[dict], cap: int = TIMELINE_CAP) -> dict:
    """The compact timeline the page draws, from Chrome trace events: one row per (pid, tid) named by the
    metadata events, GPU rows first; complete ("X") events as flat [row, ts, dur, name, tip, lane] numbers with
    times in microseconds from the first event, names and tips interned. ``lane`` is the event's nesting depth
    in its row (a CPU thread's ranges hold its op ranges, which hold its launch calls); ``lanes`` gives each
    row's depth. Activities and launches, and the CPU range slices, are each capped at ``cap`` (the slices come
    last in the stream and would be the first cut). Flow events are not drawn."""
    proc: dict = {}
    thread: dict = {}
    xs: list = []
    ranges: list = []
    cut = False
    for e in trace_events:
        ph = e.get("ph")
        if ph == "X":
            into = ranges if e.get("cat") == "range" else xs
            if len(into) < cap:
                into.append(e)
            else:
                cut = True
        elif ph == "M" and e.get("name") == "process_name":
            proc[e["pid"]] = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_name":
            thread[(e["pid"], e["tid"])] = e["args"]["name"]
    measured = sum(1 for e in ranges if _measured(e.get("args") or {}))
    xs += ranges
    keys = sorted({(e["pid"], e["tid"]) for e in xs},
                  key=lambda k: (not str(proc.get(k[0], "")).startswith("GPU"), k[0], k[1]))
    row_of = {k: i for i, k in enumerate(keys)}
    # Nesting depth per row: events by start (the longer first at one start), a stack of open ends.
    xs.sort(key=lambda e: (row_of[(e["pid"], e["tid"])], e["ts"], -e["dur"]))
    lanes = [1] * len(keys)
    names: dict = {}
    tips: dict = {"": 0}
    t0 = min((e["ts"] for e in xs), default=0.0)
    flat: list = []
    stack: list = []
    row_now = -1
    for e in xs:
        row = row_of[(e["pid"], e["tid"])]
        if row != row_now:
            row_now, stack = row, []
        while stack and stack[-1] <= e["ts"]:
            stack.pop()
        lane = len(stack)
        stack.append(e["ts"] + e["dur"])
        lanes[row] = max(lanes[row], lane + 1)
        n = names.setdefault(e["name"], len(names))
        t = tips.setdefault(_tip(e.get("args") or {}), len(tips))
        flat += [row, round(e["ts"] - t0, 3), round(e["dur"], 3), n, t, lane]
    return {
        "rows": [_row_label(proc.get(p), thread.get((p, t)), p, t) for p, t in keys],
        "row_pid": [p for p, _ in keys], "row_tid": [t for _, t in keys], "lanes": lanes,
        "names": list(names), "tips": list(tips), "ev": flat, "t0_us": t0, "cut_at": cap if cut else None,
        "ranges": len(ranges), "ranges_measured": measured,
    }


def _row_label(proc: str | None, thread: str | None, pid, tid) -> str:
    # Short enough for the timeline's label column: "GPU 0 · stream 7", "pid 1105 · thread 1134".
    p = (proc or f"pid {pid}").split(" (")[0].replace("CPU process ", "pid ")
    return f"{p} \u00b7 {thread or tid}"


def render(tables: list[Table], meta: dict, trace_events: list | None, out: IO[str],
           activities: dict | None = None, headline: dict | None = None) -> None:
    """Write the report page to ``out``.

    meta: ``title``, ``source`` and ``generated`` (shown in the header), ``notice`` (a sentence shown above the
    views, e.g. that the input has no GPU activity), and for the trace section
    ``trace_shown`` / ``trace_total`` (GPU activities drawn / in the input) and ``trace_file`` (the full trace
    written by ``--trace``, if any). trace_events: Chrome trace events for the timeline, or None for no trace
    section; more than TIMELINE_CAP complete events are cut. activities: the table of every GPU activity
    (pyprof.report.activity_table.ActivityTable.to_dict), whose number columns go in as they are; headline: the
    headline's dict (pyprof.report.headline). Raises nothing of its own.
    """
    tl = timeline(trace_events) if trace_events else None
    data = _bounded({"meta": meta, "tables": [t.to_dict() if isinstance(t, Table) else t for t in tables],
                     "timeline": tl, "headline": headline})
    if activities is not None:
        # only the strings are walked: a million numbers per column would make the walk the page's cost
        data["activities"] = {**activities, "strings": _bounded(activities["strings"])}
    # The header's text can hold file names (the input's, --title's): escaped for HTML, and their control
    # characters shown as escapes, as prof prints names.
    def esc(text) -> str:
        return html.escape(printable(str(text)))

    title = meta.get("title") or "pyprof report"
    info = " \u00b7 ".join(str(meta[k]) for k in ("source", "gpu", "summary", "generated") if meta.get(k))
    out.write("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
              f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{esc(title)}</title>\n"
              f"<style>\n{_asset('report.css')}</style>\n</head><body>\n"
              f"<header><h1>{esc(title)}</h1><span class=\"meta\">{esc(info)}</span>"
              "<span class=\"tools\"><input id=\"filter\" type=\"search\" placeholder=\"Filter: op, kernel, line, layer\" "
              "aria-label=\"filter every table\" autocomplete=\"off\">"
              "<select id=\"worker\" style=\"display:none\" aria-label=\"worker\"></select></span></header>\n"
              "<div class=\"layout\"><nav id=\"nav\"></nav><main>\n")
    if meta.get("notice"):  # in the HTML itself: it must show without the script too
        out.write(f"<p class=\"notice\" id=\"notice\">{esc(meta['notice'])}</p>\n")
    out.write("<section id=\"headline\" class=\"headline\"></section>\n"
              "<section id=\"drill\" style=\"display:none\"></section>\n")
    if tl is not None:
        out.write(f"<section id=\"trace\"><h2>Timeline</h2><p class=\"notes\">{esc(_trace_note(meta, tl))}</p>"
                  "<div id=\"trace-body\"></div></section>\n")
    out.write("<div id=\"views\"></div>\n<section id=\"view-activities\" data-view=\"activities\"></section>\n")
    out.write("<noscript>This report needs JavaScript to draw its tables.</noscript>\n</main></div>\n"
              f"<script type=\"application/json\" id=\"pyprof-data\">{embed_json(data)}</script>\n"
              f"<script>\n{_asset('timeline.js')}</script>\n<script>\n{_asset('report.js')}</script>\n"
              "</body></html>\n")


def _trace_note(meta: dict, tl: dict) -> str:
    shown = len(tl["ev"]) // 6
    total, drawn = meta.get("trace_total"), meta.get("trace_shown")
    n, measured = tl.get("ranges", 0), tl.get("ranges_measured", 0)
    drawn_why = ("drawn from their first launch to their last: the records carry no push and pop times for them "
                 "(written before parse wrote them, or a replayed CUDA graph's node ranges, pushed at its capture)")
    how = ("" if n == 0 else ", each from its push to its pop" if measured == n else f", {drawn_why}" if measured == 0
           else f", {measured:,} of {n:,} from their push to their pop, the others {drawn_why}")
    parts = [f"{shown:,} timeline events (GPU activities, their CPU launch calls, and the CPU ranges around "
             f"them: steps, layers, ops{how})" if n else
             f"{shown:,} timeline events (GPU activities and their CPU launch calls; no CPU range encloses them)"]
    if total is not None and drawn is not None and drawn < total:
        parts.append(f"from the first {drawn:,} of {total:,} GPU activities: the page is capped to stay small")
    if tl.get("cut_at"):
        parts.append(f"cut at {tl['cut_at']:,} events to keep the page small")
    full = meta.get("trace_file")
    parts.append(f"the full trace with flow arrows is in {full}" if full else
                 "for the full trace with flow arrows, run: pyprof report INPUT -o report.html --trace trace.json")
    parts.append("open it in ui.perfetto.dev or chrome://tracing")
    return "; ".join(parts) + "."
