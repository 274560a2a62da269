"""Training steps counted at their ends, and the capture window they set: after ``warmup`` steps, pyprof's
markers and the CUDA profiler (``cudaProfilerStart``: what ``nsys --capture-range=cudaProfilerApi`` waits for) are
on for ``steps`` steps, each inside a ``ProfilerStep#k`` range; every step is timed (pyprof.nvtx.timing), so that
the steps that ran with nothing of the capture on are the program's own.

Used by ``pyprof.step()`` (a script that calls pyprof.init() itself) and by ``pyprof run``'s boot module (which
counts optimizer steps). ``pyprof.step()``'s window ends with one zero-length range in the domain ``pyprof`` whose
text is a program mark (record.PROGRAM_MARK_PREFIX): the step times so far, so that the capture itself carries them
and parse writes them as the program line (record.program_line). pyprof run writes them to a file at the script's
exit instead (it also times the steps after the capture).
"""
from __future__ import annotations

import atexit
import json
import os
from typing import Callable

from pyprof.common import UsageError
from pyprof.nvtx.timing import StepTimer
from pyprof.record import PROGRAM_MARK_PREFIX


class Window:
    """The capture window over counted steps. ``markers(on)`` turns pyprof's markers on or off; ``push``/``pop``
    open and close the step ranges (the default NVTX domain, as PyTorch's profiler names its steps);
    ``mark``: write the program mark at the window's end (pyprof.step()), or not (pyprof run: its own file).
    Raises UsageError for negative counts."""

    def __init__(self, torch, warmup: int, steps: int, markers: Callable[[bool], None],
                 push: Callable[[str], object] | None = None, pop: Callable[[], object] | None = None,
                 mark: bool = False, unit: str = "step") -> None:
        if warmup < 0 or steps < 0:
            raise UsageError(f"warmup and steps must be 0 or more, not {warmup} and {steps}")
        self.torch, self.warmup, self.steps, self.markers, self.mark = torch, warmup, steps, markers, mark
        self.push = push or torch.cuda.nvtx.range_push
        self.pop = pop or torch.cuda.nvtx.range_pop
        self.timer = StepTimer(torch, unit)
        self.done = 0  # steps ended so far
        self.open = False  # a step range is open
        self.capturing = False
        self.finished = False

    def start(self) -> None:
        """Before the first step: with no warm-up, the capture starts at once."""
        self.markers(False)
        if self.warmup == 0:
            self._begin()

    def phase(self) -> str:
        """The phase (pyprof.nvtx.timing.PHASES) of the step that just ended, the ``done``-th."""
        n, w, last = self.done, self.warmup, self.warmup + self.steps
        if n > w and (not self.steps or n <= last):
            return "captured"
        if self.steps and n == last + 1:
            return "skipped"  # the first step after the capture pays for ending it (a synchronize)
        return "unprofiled"

    def boundary(self) -> None:
        """A step ended now."""
        self.done += 1
        self.timer.boundary(self.phase())
        if self.finished:
            return
        if self.done == self.warmup:
            self._begin()
        elif self.done > self.warmup:
            if self.steps and self.done >= self.warmup + self.steps:
                self.finish()
            else:
                self._range()

    def _begin(self) -> None:
        self.markers(True)
        self.capturing = True
        if self.torch.cuda.is_available():
            self.torch.cuda.synchronize()
            self.torch.cuda.profiler.start()
        self._range()

    def _range(self) -> None:
        if self.open:
            self.pop()
        self.push(f"ProfilerStep#{self.done - self.warmup}")
        self.open = True

    def finish(self) -> None:
        """End the capture (its steps are done, or the script ends). Idempotent."""
        if self.finished:
            return
        self.finished = True
        if self.open:
            self.pop()
            self.open = False
        if self.capturing and self.mark:
            self._program_mark()
        if self.capturing and self.torch.cuda.is_available():
            self.torch.cuda.synchronize()
            self.torch.cuda.profiler.stop()
        self.markers(False)

    def _program_mark(self) -> None:
        """The step times so far as one zero-length range inside the capture (one synchronize: the window is
        ending). A device that cannot read its events leaves no mark: the report then says no unprofiled step
        was measured."""
        from pyprof import nvtx

        try:
            program = self.timer.program()
        except RuntimeError:
            return
        emitter = nvtx.state.emitter
        if emitter is not None and program["unprofiled_step_ns"]:
            emitter.push_text(PROGRAM_MARK_PREFIX + json.dumps(program, separators=(",", ":")) + "}")
            emitter.pop()


class ForwardCounter:
    """Calls ``at_end()`` where an outermost ``nn.Module`` call returns (one per thread's call stack): the step of a
    loop that repeats forwards, as generate() does once per token and a serving loop once per batch.

    ``nn.Module.__call__`` is wrapped rather than hooked: global forward hooks run in the order they were added, and
    the step ranges must close after pyprof's module ranges (NVTX pops the innermost range, whoever pushed it). A
    call traced by Dynamo is passed through (``is_compiling`` is a constant to it); a call that raises still ends.
    """

    def __init__(self, at_end: Callable[[], None]) -> None:
        import threading

        import torch

        self.at_end = at_end
        self.local = threading.local()
        self.torch = torch
        self.original = None

    def install(self) -> None:
        module = self.torch.nn.Module
        original = module.__call__
        is_compiling = self.torch.compiler.is_compiling
        local, at_end = self.local, self.at_end

        def __call__(self, *args, **kwargs):
            if is_compiling():
                return original(self, *args, **kwargs)
            depth = getattr(local, "depth", 0)
            local.depth = depth + 1
            try:
                return original(self, *args, **kwargs)
            finally:
                local.depth = depth
                if depth == 0:
                    _uncompiled(at_end)

        _run_eagerly_compile_within(__call__)
        _never_compile_step_ends()
        self.original = original
        module.__call__ = __call__

    def remove(self) -> None:
        if self.original is not None:
            self.torch.nn.Module.__call__ = self.original
            self.original = None


def _run_eagerly_compile_within(fn) -> None:
    """Tell Dynamo to run ``fn``'s frame as it is and compile the frames it calls as it would have: a library that
    compiles ``model.__call__`` (transformers' generate() with a static cache) then compiles the model's forward,
    while the step is still counted where the call returns. Traced, the counter would vanish from the graph; never
    compiled with what it calls (as pyprof's module hooks are), the model would run eagerly (4.7 ms a token for a
    Llama's decode on the H100, against 1.3 ms under its CUDA graphs). Torch versions without the setting trace
    it as before."""
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:
        return
    set_code_exec_strategy(fn.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.DEFAULT))


def _uncompiled(fn) -> None:
    """Call ``fn`` with nothing it runs compiled: the step's end turns markers on and off (init() patches torch),
    which Dynamo must neither trace nor compile as frames of the compiled call it ends."""
    fn()


def _never_compile_step_ends() -> None:
    from pyprof.nvtx.modules import _never_compiled

    _never_compiled(_uncompiled)


class _Helper:
    """pyprof.step()'s window, made at its first call."""

    window: Window | None = None
    settings: tuple[int, int] | None = None
    open_range = False  # without a window: a step range is open
    counted = 0  # without a window: step ranges opened
    forwards: ForwardCounter | None = None  # forward_steps()'s counter
    unit = "step"  # what a step is: "forward" under forward_steps()


_helper = _Helper()


def step(*, warmup: int = 0, steps: int = 0) -> None:
    """Call at the end of each training step.

    With ``warmup`` and ``steps`` (pass the same values at every call): pyprof.init()'s markers are off for the
    first ``warmup`` steps, then on, with ``cudaProfilerStart`` (Nsight Systems' ``--capture-range=cudaProfilerApi``),
    for ``steps`` steps (0: to the script's end), each in a ``ProfilerStep#k`` range; then off, with
    ``cudaProfilerStop``. Every step is timed with one CUDA event at its end, and the window's end writes the step
    times into the capture, so that prof sets the program's own step (the warm-up steps, nothing of the capture on)
    beside the captured one. Call ``pyprof.init()`` before the loop: its options are the window's markers'.
    Without either: each step while init() is in effect is a ``ProfilerStep#k`` range, and nothing is timed.

    Under ``pyprof run``, which keeps the window itself, it does nothing.
    Raises UsageError for negative values, or values that differ from the first call's.
    """
    from pyprof import nvtx

    if os.environ.get("PYPROF_RUN_BACKEND"):
        return  # pyprof run counts the steps and keeps the window itself
    if _helper.settings is None:
        if warmup < 0 or steps < 0:
            raise UsageError(f"pyprof.step: warmup and steps must be 0 or more, not {warmup} and {steps}")
        if steps and not warmup:
            raise UsageError("pyprof.step: warmup must be at least 1 with steps (the first step has ended when "
                             "pyprof.step is first called)")
        _helper.settings = (warmup, steps)
        if warmup or steps:
            import torch

            # The step ranges go where the markers go (pushed while they are on): testable with a recording sink,
            # and present on a CPU build of torch, which has no torch.cuda.nvtx.
            _helper.window = Window(torch, warmup, steps, nvtx.set_markers,
                                    lambda text: nvtx.state.emitter.push_text(text),
                                    lambda: nvtx.state.emitter.pop(), mark=True, unit=_helper.unit)
            _helper.window.markers(False)
            atexit.register(_helper.window.finish)
    elif _helper.settings != (warmup, steps):
        raise UsageError(f"pyprof.step: warmup={warmup}, steps={steps} differ from the first call's "
                         f"warmup={_helper.settings[0]}, steps={_helper.settings[1]}")
    if _helper.window is not None:
        _helper.window.boundary()
        return
    _plain_range(nvtx)


def forward_steps(*, warmup: int = 0, steps: int = 0) -> None:
    """Call once before an inference loop: from now on each outermost ``nn.Module`` call (a forward of the model:
    each token of generate(), each batch of a serving loop) is a step, as if ``pyprof.step(warmup=warmup,
    steps=steps)`` were called where it returns. The program's own times are then per forward (prof's overview:
    time per output token for decode). Raises UsageError as pyprof.step() does, or when called twice."""
    if os.environ.get("PYPROF_RUN_BACKEND"):
        return  # pyprof run counts the steps itself (--forward-steps)
    if _helper.forwards is not None:
        raise UsageError("pyprof.forward_steps: called twice")
    if warmup < 0 or steps < 0 or (steps and not warmup):
        raise UsageError(f"pyprof.forward_steps: warmup must be 1 or more with steps, and neither negative, not "
                         f"warmup={warmup}, steps={steps}")
    _helper.unit = "forward"
    counter = ForwardCounter(lambda: step(warmup=warmup, steps=steps))
    counter.install()
    _helper.forwards = counter


def _plain_range(nvtx) -> None:
    """Without a window: step ranges while init() is in effect (a range open when uninit() came stays open)."""
    emitter = nvtx.state.emitter
    if _helper.open_range and emitter is not None:
        emitter.pop()
    _helper.open_range = False
    if emitter is not None:
        emitter.push_text(f"ProfilerStep#{_helper.counted}")
        _helper.counted += 1
        _helper.open_range = True


def reset() -> None:
    """Forget pyprof.step()'s window, ending it first (tests; a script that starts over)."""
    global _helper
    if _helper.window is not None:
        _helper.window.finish()
    if _helper.forwards is not None:
        _helper.forwards.remove()
    _helper = _Helper()
