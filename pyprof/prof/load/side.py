"""What parse's side lines hold (record.SIDE_KEY): one reader per kind, registered here. A kind this version
does not know (written by a newer pyprof) is skipped: the records still read, and only its view lacks it."""
from __future__ import annotations

from typing import Callable

from pyprof.common import InputError
from pyprof.record import SIDE_KEY
from pyprof.prof.host_time import HostRun
from pyprof.prof.load.joined import JoinRun
from pyprof.prof.memory_timeline import MemoryRun
from pyprof.prof.load.program import ProgramRun
from pyprof.prof.load.window import WindowRun

#: kind -> reader of a decoded line: ``(dict, path, line number) -> run``; a run has ``pid`` and ``KIND``, the
#: name of the WorkerData list it joins (aggregate.attach_side), but for a run with ``PER_INPUT`` (the join line:
#: the input's, not a process's), which aggregate keeps by input name (Aggregate.joins).
READERS: dict[str, Callable] = {MemoryRun.KIND: MemoryRun.read, HostRun.KIND: HostRun.read,
                                WindowRun.KIND: WindowRun.read, ProgramRun.KIND: ProgramRun.read,
                                JoinRun.KIND: JoinRun.read}


def read_side(d: object, path: str, lineno: int):
    """The run a decoded side line holds, or None for a kind this pyprof does not read. Raises InputError naming
    the line for one that is damaged."""
    kind = d.get(SIDE_KEY) if type(d) is dict else None
    if type(kind) is not str:
        raise InputError(path, f"line {lineno}: a damaged side line (its kind is not a string)")
    reader = READERS.get(kind)
    return None if reader is None else reader(d, path, lineno)
