"""Capture stage: ``pyprof.init()`` wraps torch so every call is an NVTX range naming op, arguments and call site.

Run the script under Nsight Systems (``nsys profile -t cuda,nvtx ...``), then ``pyprof parse``.
The range format is docs/markers.md.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import types
import warnings

import torch

from pyprof.common import UsageError
from pyprof.nvtx import graphs, inductor, patch
from pyprof.nvtx.emit import Emitter, NvtxSink, ProfilerSink, RecordingSink
from pyprof.nvtx.modules import ModuleRanges
from pyprof.nvtx.step_window import forward_steps, step

__all__ = ["init", "uninit", "wrap", "layer", "is_initialized", "profiling", "step", "forward_steps",
           "RecordingSink", "ProfilerSink"]


class _State:
    """What init() changed. ``emitter`` is None whenever capture is off: wrappers test only that."""

    def __init__(self):
        self.emitter: Emitter | None = None
        self.patches = patch.Patches()
        self.wraps = patch.Patches()
        self.modules: ModuleRanges | None = None
        self.autograd_nvtx = None
        self.compiling = False
        self.exit_hook = False  # _stop_autograd_nvtx is registered with atexit
        self.options: dict = {}  # the last init()'s options: set_markers(True) turns the same markers on


state = _State()


def is_initialized() -> bool:
    """Return True while ``init()`` is in effect."""
    return state.emitter is not None


def init(*, modules: bool = True, stack: bool = False, backward: bool = True, ops: bool = True, sink=None) -> None:
    """Wrap torch so that each call emits an NVTX range carrying op, arguments and call site.

    modules: also name every ``nn.Module`` call by its qualified name (``encoder.layers.0``).
    stack: record every user frame in each marker, not only the innermost (costs more per call).
    backward: turn on PyTorch's autograd NVTX ranges (what ``emit_nvtx`` does) when CUDA is available,
        so backward kernels can be linked to their forward op through sequence numbers.
    ops: wrap torch's callables (every eager op). Without, only what torch.compile generates is named (each
        kernel's range, pyprof.nvtx.inductor), plus modules and layers as asked: ``pyprof run --backend torch``
        uses that, since the PyTorch profiler records eager ops itself.
    sink: where ranges go; the default is the NVTX domain ``pyprof``. Tests pass a recorder.

    Calling it again while initialized does nothing. Returns None; raises nothing for a working torch.
    """
    if state.emitter is not None:
        return
    state.options = {"modules": modules, "stack": stack, "backward": backward, "ops": ops, "sink": sink}
    emitter = Emitter(sink if sink is not None else NvtxSink(), stack=stack)
    for owner, name, mod in patch.targets() if ops else ():
        fn = getattr(owner, name)
        state.patches.replace(owner, name, patch.make_wrapper(fn, mod, name, state))
    _patch_compilers()
    inductor.install(state)
    graphs.install(state)
    if modules:
        # torch warns that global hooks also fire for torch.compile's wrapper module; pyprof names
        # that call after the module it wraps, so the warning says nothing to the user.
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
        state.modules = ModuleRanges(state)
        state.modules.install()
    if backward:
        _start_autograd_nvtx()
        if not state.exit_hook:
            # PyTorch's NVTX profiler mode left on at exit crashes a process whose NCCL process group ran (SIGSEGV
            # after "pure virtual method called", seen on 2 H200s with DDP): turn it off first. atexit runs its
            # handlers last-registered first, so this runs before torch's own.
            atexit.register(_stop_autograd_nvtx)
            state.exit_hook = True
    state.emitter = emitter


def uninit() -> None:
    """Undo ``init()`` and every ``wrap()``: torch's attributes are exactly what they were before."""
    state.emitter = None
    inductor.remove()
    _stop_autograd_nvtx()
    if state.modules is not None:
        state.modules.remove()
        state.modules = None
    state.patches.restore()
    state.wraps.restore()


def install_off(*, ops: bool = True) -> None:
    """The wrappers installed (``init(ops=ops)``, no module hooks, no autograd ranges) and off: they call straight
    through while ``state.emitter`` is None, the one thing they test. pyprof run's boot module installs them so
    before the script runs, so that what the script imports of torch is the wrappers, which set_markers(True)
    or init() later turn on."""
    init(ops=ops, modules=False, backward=False)
    state.emitter = None


def set_markers(on: bool) -> None:
    """Markers on (``init()`` with the last init()'s options, its defaults if none) or off (``uninit()``: torch as
    it was, so that the steps timed while they are off cost nothing of pyprof's). Wrappers a script already holds
    (``from torch import add``) read the same state, so they mark again once on."""
    if on:
        init(**state.options)
    else:
        uninit()


@contextlib.contextmanager
def profiling(**options):
    """``with pyprof.profiling(): ...`` is ``init(**options)`` on entry and ``uninit()`` on exit."""
    init(**options)
    try:
        yield
    finally:
        uninit()


def wrap(obj, name: str, label: str | None = None) -> None:
    """Give ``obj.name`` a range with the same payload as torch's own calls.

    obj: a ``torch.autograd.Function`` subclass (name ``forward`` or ``backward``), an ``nn.Module``
        subclass or instance (``forward``), or a module such as a C++/CUDA extension (a function name).
    label: the marker's ``mod``; by default the class or module name.
    Raises UsageError when ``obj`` has no callable ``name``. Effective while ``init()`` is.
    """
    fn = inspect.getattr_static(obj, name, None)
    if fn is None or not callable(getattr(obj, name, None)):
        raise UsageError(f"pyprof.wrap: {obj!r} has no callable attribute {name!r}")
    mod = label or getattr(obj, "__name__", None) or type(obj).__name__
    if isinstance(fn, staticmethod):
        # An autograd Function's forward/backward take ctx first: an object that says nothing of the call.
        is_function = isinstance(obj, type) and issubclass(obj, torch.autograd.Function)
        new = staticmethod(patch.make_wrapper(fn.__func__, mod, name, state, skip_self=is_function))
    elif isinstance(obj, type) and isinstance(fn, types.FunctionType):
        # An unbound method: the first argument is the instance, which says nothing about the call.
        new = patch.make_wrapper(fn, mod, name, state, skip_self=True)
    elif isinstance(fn, classmethod):
        new = classmethod(patch.make_wrapper(fn.__func__, mod, name, state, skip_self=True))
    else:
        new = patch.make_wrapper(getattr(obj, name), mod, name, state)
    state.wraps.replace(obj, name, new)


class layer(contextlib.ContextDecorator):
    """``with pyprof.layer("conv1"):`` or ``@pyprof.layer("block")``: a ``layer:name`` range.

    Kernels launched inside are grouped under that layer by ``pyprof.prof --group-by layer``. Does
    nothing while ``init()`` is not in effect.
    """

    def __init__(self, name: str):
        self.text = f"layer:{name}"
        self.pushed = []

    def __enter__(self):
        emitter = state.emitter
        if emitter is not None:
            emitter.push_text(self.text)
        self.pushed.append(emitter)
        return self

    def __exit__(self, *exc):
        emitter = self.pushed.pop()
        if emitter is not None:
            emitter.pop()
        return False


def _patch_compilers() -> None:
    # TorchScript compiles the Python source of what it calls and knows torch's builtins by identity:
    # our wrappers are neither, so scripting and tracing run with torch as it was.
    for name in ("script", "trace", "trace_module"):
        original = getattr(torch.jit, name, None)
        if original is not None:
            state.patches.replace(torch.jit, name, _unpatched(original))


def _unpatched(fn):
    @functools.wraps(fn)
    def run_without_pyprof(*args, **kwargs):
        if state.compiling:  # TorchScript recurses into torch.jit.script for what a module calls
            return fn(*args, **kwargs)
        state.compiling = True
        try:
            with state.patches.suspended(keep=lambda owner, name: owner is torch.jit), state.wraps.suspended():
                return fn(*args, **kwargs)
        finally:
            state.compiling = False

    return run_without_pyprof


def _start_autograd_nvtx() -> None:
    if not torch.cuda.is_available():
        return  # PyTorch's NVTX profiler mode exists only in CUDA builds.
    cls = torch.autograd.profiler.emit_nvtx
    ctx = cls(record_shapes=False)
    real_exit = cls.__exit__
    ctx.__enter__()
    state.autograd_nvtx = (ctx, real_exit)
    # A script that enters emit_nvtx itself would fail ("not reentrant" / already enabled): while
    # pyprof holds the autograd NVTX mode, the user's context does nothing.
    state.patches.replace(cls, "__enter__", lambda self: self)
    state.patches.replace(cls, "__exit__", lambda self, *exc: False)


def _stop_autograd_nvtx() -> None:
    held, state.autograd_nvtx = state.autograd_nvtx, None
    if held is not None:
        ctx, real_exit = held
        real_exit(ctx, None, None, None)
