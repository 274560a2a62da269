"""Which frames of a Python call stack are the user's: a call site is the innermost frame outside torch's own code.
Shared by the readers of call stacks (Kineto's Python frame events, Nsight Systems' Python backtraces), and kept
apart from them so that reading one kind of profile does not import the readers of the others."""
from __future__ import annotations

import re

#: Frames that are never the user's call site: torch's own (pyprof.init() skips the same), builtins, frozen
#: modules, and apex.pyprof's wrapper between the user's call and torch's function (its nvmarker.py, in the call
#: stacks its traceMarker recorded), and pyprof's own capture (its wrappers, pyprof run's boot module, in a PyTorch
#: profiler's Python frames); paths are relative to their sys.path folder ("torch/...") or absolute
#: (".../site-packages/torch/").
INTERNAL = re.compile(r"^(?:torch/|<|.*/site-packages/torch/|.*/torch/(?:nn|autograd|optim|_|utils|cuda)/"
                      r"|(?:.*/)?apex/pyprof/|(?:.*/)?pyprof/(?:nvtx|run/boot)/)")


def internal_file(path: str) -> bool:
    """True for a frame's file that is torch's own code or no file (``<string>``): a call site is the innermost frame
    outside these."""
    return INTERNAL.match(path) is not None


def user_site(frames: list) -> str | None:
    """The innermost of ``frames`` (``file:line`` texts, outermost first, as a marker recorded its call stack) whose
    file is not internal_file: the user's line. None when every frame is torch's own."""
    for frame in reversed(frames):
        path, colon, line = frame.rpartition(":")
        if not internal_file(path if colon and line.isdigit() else frame):
            return frame
    return None
