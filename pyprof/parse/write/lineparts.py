"""The record line of parse's writers (the Python path's, writer._merge_lines, and the compiled core's,
native_lines): its template derived from record.LINE_RUNS, the JSON of its cached parts, the header line, and the
constants by which both join activities to their launch calls.
"""
from __future__ import annotations

from pyprof.record import LINE_RUNS, Part, header_line
from pyprof.parse.write import encode
from pyprof.parse.readers.activities import Source

#: How far a GPU timestamp may run ahead of the launch call's CPU timestamp (clock conversion jitter).
CLOCK_SKEW_NS = 50_000_000
#: Launches kept after their first activity, for the further kernels of a CUDA graph launch, and op calls
#: whose kernel count (subSeqId) is kept (at least this many, the newest; common.BoundedDict): the kernels of
#: one call run back to back, far within this.
RECENT = 16_384


def _template() -> str:
    """The line as a %-format, derived from record.LINE_RUNS: a RECORD field formatted per line, any other run
    of fields a cached text (its own leading comma, or empty when all its fields are left out)."""
    out = []
    for i, (part, fields) in enumerate(LINE_RUNS):
        if part is Part.RECORD:
            out.append(f'{"," if i else ""}"{fields[0].name}":%s')
        else:
            out.append("%s")
    return "{" + "".join(out) + "}"


LINE = _template()
#: The order in which writer._merge_lines and the compiled core (_core.c, activity_line) hand LINE its values.
#: Derived from the table, checked here: a field added to an existing part needs nothing in either; a new RECORD
#: field (one formatted per line) or a new part needs its value passed in both, in this order.
_ORDER = tuple(fields[0].name if part is Part.RECORD else part.value for part, fields in LINE_RUNS)
_EXPECTED = ("name", "kDuration", "start_ns", "pid", "tid", "place", "correlation_id", "config", "launch", "copy",
             "attribution", "subSeqId", "call_id", "attribution")
if _ORDER != _EXPECTED:  # pragma: no cover - fails at import, in every test, when the table changes shape
    raise ImportError(f"pyprof.parse.write.lineparts formats the line as {_EXPECTED}, the record is now {_ORDER}: pass "
                      "the new field's value in writer._merge_lines and _core.c's activity_line")
_RUNS = {part: fields for part, fields in LINE_RUNS if part is not Part.RECORD}
_NAME, _PLACE, _CONFIG, _LAUNCH, _COPY = (_RUNS[p] for p in (Part.NAME, Part.PLACE, Part.CONFIG, Part.LAUNCH,
                                                              Part.COPY))


def header(source: Source) -> tuple[str, dict]:
    """(parse's header line for ``source``, device -> its GPU's name). A device the export does not describe
    gets the GPU of those it does when they are all one model (a PyTorch profiler trace may describe device 0
    while its kernels ran on device 2): ``"*"`` in the header, and the value the second item's .get gives."""
    known = source.gpus()
    gpus = {str(dev): {"gpu": g.name, "gpu_props": g.props} for dev, g in known.items()}
    models = {g.name for g in known.values()}
    if len(models) == 1 and None not in models:
        only = next(iter(known.values()))
        gpus["*"] = {"gpu": only.name, "gpu_props": only.props}
    names = {dev: g.name for dev, g in known.items()}
    return header_line(gpus, source.dist()), names


#: The launch part: ``API_JSON % encode.string(api)``, the call's start, ``API_END_KEY``, its end; NO_CALL without one.
API_JSON = "".join(f',"{f.name}":{"%s" if i == 0 else ""}' for i, f in enumerate(_LAUNCH[:2]))
API_END_KEY = f',"{_LAUNCH[2].name}":'
NO_CALL = encode.part(_LAUNCH, (None, None, None))


def shape_parts(grid: tuple, block: tuple, registers: int | None, static_smem: int | None, dynamic_smem: int | None,
                smem: int | None, occupancy_pct: float | None, gpu: str | None, nbytes: int | None,
                copy_kind: str | None) -> tuple[str, str]:
    """(the config part's JSON, the copy part's JSON) of an activity (both readers' writers make them here)."""
    if static_smem is not None and dynamic_smem is not None and smem in (None, static_smem + dynamic_smem):
        smem = None  # the sum of the two, which readers compute (record.DERIVED): left out
    return (encode.part(_CONFIG, (grid, block, registers, static_smem, dynamic_smem, smem, occupancy_pct, gpu)),
            encode.part(_COPY, (nbytes, copy_kind)))


def no_gpu_name(gpu_names: dict):
    """The GPU name of a device the export does not describe: the one model all described ones are, else None."""
    return gpu_names[next(iter(gpu_names))] if len({*gpu_names.values()}) == 1 and None not in gpu_names.values() \
        else None
