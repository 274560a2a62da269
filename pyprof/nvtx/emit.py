"""The hot path: find the user's call site, look the marker up by signature, push and pop the NVTX range.

Everything per call is a few attribute reads and one dict lookup; the JSON text and the NVTX event
attributes are built once per distinct (callable, call site, argument signature).
"""
from __future__ import annotations

import itertools
import json
import os
import threading

import nvtx

from pyprof.common import BoundedDict
from pyprof.nvtx import payload

DOMAIN = "pyprof"
#: A cache of markers grows with distinct signatures; past this size its oldest half is dropped rather than
#: grown (e.g. a scalar argument that changes every step, such as a scheduled learning rate).
MAX_CACHED_MARKERS = 200_000
_MISS = object()  # cached attributes are None when no profiler is attached

_signature = payload.signature
_FAST_TENSORS = payload.PLAIN_TENSORS
_SCALARS = payload.SCALAR_TYPES
_TORCH_DIR = os.path.dirname(os.path.dirname(payload.torch.__file__)) + os.sep + "torch" + os.sep
_PYPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Folders whose frames are never the user's call site: torch, pyprof, and where torch.compile writes the code
# it generates (added by pyprof.nvtx.inductor), whose wrappers call torch functions too.
_internal_dirs = (_TORCH_DIR, _PYPROF_DIR)


def add_internal_dir(path: str) -> None:
    """Treat frames of files under ``path`` as internal (never a call site), from now on."""
    global _internal_dirs
    prefix = os.path.join(path, "")
    if prefix not in _internal_dirs:
        _internal_dirs = _internal_dirs + (prefix,)


class NvtxSink:
    """Emits ranges to the real NVTX domain ``pyprof`` (a no-op when no profiler is attached)."""

    def __init__(self):
        self.domain = nvtx.get_domain(DOMAIN)
        # The domain's own method, called straight from the wrappers: one Python frame less on every call.
        self.pop = self.domain.pop_range

    def attributes(self, message: str):
        """Return the reusable event attributes for ``message`` (registered once with NVTX)."""
        return self.domain.get_event_attributes(message=message)

    def push(self, attrs, call_id: int) -> None:
        if attrs is not None:
            # The call id travels as the NVTX int64 payload so the registered text stays shared.
            attrs.payload = call_id
            self.domain.push_range(attrs)


class ProfilerSink:
    """Emits ranges into the PyTorch profiler's trace, as record_function ranges (``user_annotation`` events),
    for a capture without Nsight Systems (``pyprof run --backend torch``). The profiler's own Python frames name a
    function by its first line, not by the line that called the op; pyprof's marker names that line. The call id
    has no place in a record_function range and is dropped."""

    def __init__(self):
        import torch

        self._range = torch._C._profiler._RecordFunctionFast
        self._open = threading.local()  # each thread's open ranges, innermost last

    def attributes(self, message: str) -> str:
        try:
            return payload.profiler_literal(json.loads(message))
        except ValueError:  # a plain text (a layer's range): its double quotes, which would break the trace, as '
            return message.replace('"', "'")

    def push(self, attrs, call_id: int) -> None:
        r = self._range(attrs)
        r.__enter__()
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        stack.append(r)

    def pop(self) -> None:
        stack = getattr(self._open, "stack", None)
        if stack:
            stack.pop().__exit__(None, None, None)


class RecordingSink:
    """Keeps the ranges in a list instead of sending them to NVTX: ``init(sink=RecordingSink())``.

    ``events`` holds ``("push", text, call_id)`` and ``("pop",)`` tuples in call order, per process
    (not per thread). For tests, and for looking at markers without a profiler.
    """

    def __init__(self):
        self.events: list[tuple] = []

    def attributes(self, message: str) -> str:
        return message

    def push(self, attrs, call_id: int) -> None:
        self.events.append(("push", attrs, call_id))

    def pop(self) -> None:
        self.events.append(("pop",))


class Emitter:
    """Per-process state of the capture: the sink, the marker cache and the call counter."""

    def __init__(self, sink, stack: bool = False):
        self.sink = sink
        self.stack = stack
        self.cache = BoundedDict(MAX_CACHED_MARKERS)
        self.ids = itertools.count(1)
        self._internal: dict[str, bool] = {}
        # Bound once: the wrappers call these on every torch call.
        self.push = sink.push
        self.pop = sink.pop

    def is_internal(self, filename: str) -> bool:
        """True for frames of torch and pyprof, which are never the user's call site."""
        hit = self._internal.get(filename)
        if hit is None:
            hit = filename.startswith(_internal_dirs) or filename.startswith("<frozen")
            self._internal[filename] = hit
        return hit

    def user_stack(self, frame) -> list[str]:
        """Every user frame from ``frame`` outwards, returned outermost first as ``file:line``."""
        sites = []
        while frame is not None:
            if not self.is_internal(frame.f_code.co_filename):
                sites.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
            frame = frame.f_back
        return sites[::-1]

    def enter(self, key_fn, mod: str, op: str, args, kwargs, frame) -> None:
        """Push the range of one call; ``frame`` is the caller of the patched callable."""
        # The user-frame walk and the tensor signature are inlined: this runs on every torch call.
        internal = self._internal
        f = frame
        while f is not None:
            code = f.f_code
            hit = internal.get(code.co_filename)
            if hit is None:
                hit = self.is_internal(code.co_filename)
            if not hit:
                break
            f = f.f_back
        # The site's key is its code object's id and the call's bytecode offset, which fix the line: reading
        # f_lineno walks the line table (0.5 us a call in a long function) and hashing a code object hashes its
        # contents (0.3 us). The id cannot be reused while the cached entry holds the code object itself.
        site = (id(f.f_code), f.f_lasti) if f is not None else None
        try:
            # payload.signature's own answers for tensors and scalars, without its call.
            sig = [(a.shape, a.dtype, a.is_contiguous(), a.get_device(), a.requires_grad)
                   if (t := type(a)) in _FAST_TENSORS else (t, a) if t in _SCALARS else _signature(a) for a in args]
        except (RuntimeError, NotImplementedError):  # sparse or nested tensors: the careful path
            sig = [_signature(a) for a in args]
        if kwargs:
            sig.append(tuple((k, _signature(v)) for k, v in kwargs.items()))
        key = (key_fn, site, tuple(sig), tuple(self.user_stack(frame)) if self.stack else None)
        entry = self.cache.get(key)
        if entry is None:
            entry = self._build(key, mod, op, args, kwargs, f, frame)
        self.push(entry[0], next(self.ids))

    def _build(self, key, mod, op, args, kwargs, f, frame):
        site = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else ""
        stack = self.user_stack(frame) if self.stack else None
        attrs = self.sink.attributes(payload.op_marker(mod, op, args, kwargs, site, stack))
        entry = (attrs, f.f_code if f is not None else None)  # the code object keeps its id (in the key) unique
        self.cache.add(key, entry)
        return entry

    def push_text(self, text: str) -> None:
        """Push a range with a fixed text (layers, modules); cached by the text."""
        attrs = self.cache.get(text, _MISS)
        if attrs is _MISS:
            attrs = self.sink.attributes(text)
            self.cache.add(text, attrs)
        self.push(attrs, next(self.ids))
