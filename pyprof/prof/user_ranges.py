"""The user's own ranges as the name of the work they enclose (docs/views.md, "User ranges").

Code that launches kernels from Python outside any aten op (DeepEP's dispatch and combine, DeepGEMM's grouped
GEMMs, a CUDA library called through its own bindings) leaves no op to name them; the ``record_function`` or NVTX
ranges the user put around that code do. parse keeps every enclosing range in the record's ``ranges`` (outermost
first), plain user ranges by their text and pyprof's own markers shortened (``module:X``; correlate's
_range_name). This module picks the user's ranges out of that list:

- a kernel that no op encloses is named by its innermost user range, marked ``range:NAME`` so that a table never
  shows it as an op (an op name has no ``range:`` prefix: aten ops are ``ns::name``, pyprof's are Python names);
- such a kernel, when it has no layer of its own, takes the user ranges around it as its layer path, each marked the
  same way. A kernel inside an op keeps its layer (or none): which of its ranges are the user's the record does not
  say (an op's range is named by the op in ``ranges``, as a user range by its text).

Not the name of any work, and skipped: steps (``ProfilerStep#N``, and user ranges that number an iteration, which
the overview takes as steps), pyprof's own payloads (``{...}``) and layer ranges (``module:``, ``layer:``: these
are layers already), and Nsight Systems' functions-trace range around every module call
(``torch.nn.modules.Module.__call__``), which names no module.
"""
from __future__ import annotations

import re

from pyprof.common import BoundedDict
from pyprof.parse.attribute.markers import decode

#: The mark of a user range where an op or a layer is expected.
USER_RANGE = "range:"
#: PyTorch's step range, and user ranges that name an iteration ("step 3", "layer:train_step_3", "iteration#12",
#: "iter-4"): pyprof.prof.aggregate's steps.
PROFILER_STEP = "ProfilerStep#"
USER_STEP = re.compile(r"(?i)(?:^|[^a-z])(?:step|iter|iteration)[\s#:_-]*(\d+)\s*$")
_NOT_WORK = ("{", "module:", "layer:", "torch.nn.modules.Module.")

_work_cache = BoundedDict(100_000)  # range name -> whether it names the user's work
_layer_cache = BoundedDict(100_000)  # ranges -> the marked user ranges among them


def names_work(name) -> bool:
    """True for a range that names the user's work: a plain user range (a text parse reads no marker from) that is
    not a step, nor one of pyprof's layer ranges."""
    hit = _work_cache.get(name)
    if hit is None:
        hit = bool(name) and type(name) is str and not name.startswith(_NOT_WORK) \
            and not (name.startswith(PROFILER_STEP) and name[len(PROFILER_STEP):].isdigit()) \
            and USER_STEP.search(name) is None and decode(name) is None
        _work_cache.add(name, hit)
    return hit


def range_op(d: dict) -> str | None:
    """``range:NAME`` for an activity that no op encloses, NAME its innermost user range; None where an op encloses
    it or no user range does."""
    if d.get("op"):
        return None
    for name in reversed(d.get("ranges") or ()):
        if names_work(name):
            return USER_RANGE + name
    return None


def range_push_ns(d: dict) -> int | None:
    """The push time (parse's ``range_ns``) of the innermost user range that names an activity no op encloses: one
    instance of the range is one call of its ``range:NAME``. None where an op encloses it, no user range does, or
    the record has no range times (parsed before them)."""
    if d.get("op"):
        return None
    ranges = d.get("ranges") or ()
    times = d.get("range_ns")
    for i in range(len(ranges) - 1, -1, -1):
        if names_work(ranges[i]):
            t = times[2 * i] if type(times) is list and len(times) > 2 * i else None
            return t if type(t) is int and t >= 0 else None
    return None


def range_layers(d: dict) -> list:
    """The user ranges around an activity that no op encloses, outermost first, each ``range:NAME``; [] where an op
    encloses it. Around an op the record does not say which of its ranges are the user's: ``ranges`` names an op's
    range by the op (``ScaledAdd`` for a custom Function under emit_nvtx or pyprof), as a user range by its text."""
    if d.get("op"):
        return []
    ranges = d.get("ranges")
    if not ranges:
        return []
    key = tuple(ranges)
    hit = _layer_cache.get(key)
    if hit is None:
        hit = [USER_RANGE + name for name in ranges if names_work(name)]
        _layer_cache.add(key, hit)
    return hit
