"""The intermediate form every reader yields and ``correlate`` consumes.

Readers only translate their format's rows into these shapes; all joining (activity -> launch call ->
enclosing ranges -> forward op) happens once, in ``correlate``. Times are integer nanoseconds.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Protocol

from pyprof.parse.markers import Marker, decode


class Activity(NamedTuple):
    """One GPU activity. ``launch_key`` joins it to a :class:`Launch` (unique per file; None = no launch)."""

    kind: str  # kernel | memcpy | memset
    start_ns: int
    end_ns: int
    device: int | None
    stream: int | None
    pid: int | None
    correlation_id: int | None
    launch_key: object
    long_name: str = ""
    short_name: str = ""
    grid: tuple = ()
    block: tuple = ()
    registers: int | None = None
    static_smem_bytes: int | None = None
    dynamic_smem_bytes: int | None = None
    bytes: int | None = None
    copy_kind: str | None = None


class Launch(NamedTuple):
    """One CPU API call that started GPU work (runtime or driver API; a graph launch starts many)."""

    thread: object  # hashable, unique per thread in the file
    start_ns: int
    end_ns: int
    api: str
    key: object  # equals Activity.launch_key of the work it started
    pid: int | None
    tid: int | None


class Range:
    """One push/pop range on a CPU thread. ``marker`` is decoded lazily from ``text`` unless a reader
    supplies it (Kineto's structured events). ``parent`` is set by the sweep: the enclosing open range."""

    __slots__ = ("thread", "start_ns", "end_ns", "text", "payload", "pid", "parent", "_marker", "decoded",
                 "info", "n_sub")

    def __init__(self, thread: object, start_ns: int, end_ns: int, text: str | None, payload: int | None,
                 pid: int | None, marker: Marker | None = None):
        self.thread = thread
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.text = text
        self.payload = payload
        self.pid = pid
        self.parent: Range | None = None
        self._marker = marker
        self.decoded = marker is not None
        self.info = None  # attribution of launches whose innermost range this is (cached by correlate)
        self.n_sub: list | None = None  # [kernels counted so far] when this range stands for an op call

    @property
    def marker(self) -> Marker | None:
        """The decoded marker, or None for a plain user range."""
        if not self.decoded:
            self._marker = decode(self.text)
            self.decoded = True
        return self._marker


class GpuInfo(NamedTuple):
    """What the export says about one GPU."""

    name: str | None
    props: dict | None


class Source(Protocol):
    """What every reader provides. Iterators are sorted by start time (ranges: outer before inner)."""

    path: str
    format: str

    def gpus(self) -> dict[int, GpuInfo]: ...

    def ranges(self) -> Iterator[Range]: ...

    def launches(self) -> Iterator[Launch]: ...

    def activities(self) -> Iterator[Activity]: ...

    def close(self) -> None: ...
