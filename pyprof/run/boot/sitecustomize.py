"""Loaded by the Python interpreter that ``pyprof run`` starts (its folder is first on PYTHONPATH), before the
user's script: turns on what the chosen capture needs, counts the training steps by the optimizers' steps, and
keeps to the measured ones. Does nothing in any other process (a DataLoader worker, a subprocess), and then
loads the environment's own sitecustomize, if any. Settings come from PYPROF_RUN_* variables (pyprof.run.cli).

``import pyprof`` (the capture's, and the script's own if it has one) finds the package of the pyprof that runs
the script, and ``import nvtx`` (the capture's NVTX binding) that environment's when the script's has none
($PYPROF_RUN_PACKAGES: each name's folder), and nothing else of those folders: where pyprof is installed they
are the site-packages of pyprof's environment, whose other packages are none of the script's.
"""
import atexit
import functools
import importlib.machinery
import importlib.util
import json
import os
import sys


class _OnePackage:
    """A finder of one top-level name in one folder (its submodules are found through the package's own
    ``__path__``), so that the folder's other packages stay out of the script's reach."""

    def __init__(self, name: str, folder: str) -> None:
        self.name, self.folder = name, folder

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        return importlib.machinery.PathFinder.find_spec(name, [self.folder])


def _capture_packages() -> None:
    """pyprof first on sys.meta_path, so that the capture's markers are those of the pyprof that will parse them,
    whatever pyprof the script's environment holds; its other needs (nvtx) last, where the script's
    environment lacks them."""
    try:
        folders = json.loads(os.environ.get("PYPROF_RUN_PACKAGES", "{}"))
    except ValueError:
        return
    for name, folder in folders.items():
        finder = _OnePackage(name, folder)
        if name == "pyprof":
            sys.meta_path.insert(0, finder)
        else:
            sys.meta_path.append(finder)


def _chain() -> None:
    # The environment's own sitecustomize, which this one shadows.
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


class _Steps:
    """The measured steps: after ``warmup`` optimizer steps, ``steps`` more (0: all of them), each inside an
    NVTX range ``ProfilerStep#k`` (the steps prof's overview finds), the capture started and stopped around
    them. Every step is timed (pyprof.nvtx.timing): those before and after the capture ran with nothing of it on
    (pyprof.init()'s wrappers installed but off, no profiler), so that they are the program's own step."""

    def __init__(self, backend: str, warmup: int, steps: int, trace: str, marker: str | None = None,
                 timing: str | None = None, forwards: bool = False) -> None:
        self.backend, self.warmup, self.steps, self.trace = backend, warmup, steps, trace
        self.marker = marker  # the script's own step ranges' name, counted instead of optimizer steps
        self.forwards = forwards  # each outermost module call is a step (step_window.ForwardCounter)
        self.timing = timing  # where the step times go at exit (pyprof run reads them)
        self.done = 0  # optimizer steps so far
        self.finished = False
        self.capturing = False  # pyprof.init()'s markers are on
        self.prof = None
        self.timer = None  # pyprof.nvtx.timing.StepTimer
        self.window = None  # pyprof.nvtx.step_window.Window: the nsys backend's capture window
        self._nvtx = None  # (range_push, range_pop) as torch had them, when the script's own are counted

    def _install(self) -> None:
        """pyprof.init()'s wrappers before the script runs, so that what the script then imports of torch is the
        wrapped callables, and off at once (pyprof.nvtx.install_off): nothing of the capture is on."""
        from pyprof import nvtx

        nvtx.install_off()

    def _markers(self, on: bool) -> None:
        """pyprof.init()'s markers on (the capture's start) or off (its end). On: init() again, whole, after
        uninit() (which puts torch's attributes back): the wrappers the script already holds read the same state,
        so they mark again, once. Off: installed and off again, as before the capture (_install)."""
        import pyprof

        if on == self.capturing:
            return
        self.capturing = on
        pyprof.uninit()
        if not on:
            # not torch's own callables: code torch.compile'd before the capture guards on the type of what it
            # called (torch.cat a Python function, the wrapper), and torch's builtins would make it compile again
            self._install()
            return
        if self.backend == "nsys":
            pyprof.init()
        else:
            # The profiler records the ops and modules itself, but names a Python frame by its function's first
            # line: pyprof's op ranges, in its trace, name the calling line (and what torch.compile generates).
            from pyprof.nvtx.emit import ProfilerSink

            pyprof.init(modules=False, backward=False, sink=ProfilerSink())

    def start(self) -> None:
        import torch

        # Installed, but off until the capture begins: the steps before it are the program's own.
        self._install()
        unit = "forward" if self.forwards else "step"
        if self.backend != "nsys":
            from pyprof.nvtx.timing import StepTimer

            self.timer = StepTimer(torch, unit)
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            # a schedule in both cases, so that each step is a ProfilerStep range; --steps 0: every step after the
            # warm-up, exported when the script ends. The warm-up steps wait (no profiler on: the program's own)
            # but the last, the profiler's own warm-up (its first recorded step would pay for starting it).
            wait, warm = max(0, self.warmup - 1), min(1, self.warmup)
            schedule = torch.profiler.schedule(wait=wait, warmup=warm, active=self.steps or 2 ** 31 - 1, repeat=1)
            if self.warmup <= 1:
                self._markers(True)
            self.prof = torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True,
                                               with_stack=True, with_modules=True, profile_memory=True,
                                               on_trace_ready=self._export)
            self.prof.start()
        if self.forwards:
            from pyprof.nvtx.step_window import ForwardCounter

            ForwardCounter(lambda: self._after_step(None, None, None)).install()
        elif self.marker is not None:
            self._count_marked_ranges(torch)
        elif self.backend == "nsys" and hasattr(torch.optim.Optimizer, "profile_hook_step"):
            # The step ranges are NVTX push/pop ranges, so they must open and close outside every other range.
            # An optimizer's step hooks run inside PyTorch's own "Optimizer.step#..." range (an NVTX range under
            # pyprof.init()'s emit_nvtx): popping there would close that one. So each optimizer class's step is
            # wrapped around the wrapper that opens that range (Optimizer.profile_hook_step, which every
            # optimizer made after this point goes through), and the step is counted after it returns.
            original = torch.optim.Optimizer.profile_hook_step

            def profile_hook_step(func):
                hooked = original(func)

                @functools.wraps(hooked)
                def step(*args, **kwargs):
                    try:
                        return hooked(*args, **kwargs)
                    finally:
                        self._after_step(None, None, None)
                return step

            torch.optim.Optimizer.profile_hook_step = staticmethod(profile_hook_step)
        else:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            register_optimizer_step_post_hook(self._after_step)
        if self.backend == "nsys":
            from pyprof.nvtx.step_window import Window

            # The step ranges bypass the script's counted push/pop (set just above) where there is one.
            push, pop = self._nvtx or (torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop)
            self.window = Window(torch, self.warmup, self.steps, self._markers, push, pop, unit=unit)
            self.timer = self.window.timer
            self.window.start()
        atexit.register(self.at_exit)

    def _count_marked_ranges(self, torch) -> None:
        """A step ends where one of the script's ranges named ``marker`` closes (matched as prof's --step-marker
        matches, pyprof.prof.step_marker): record_function's exit, or the pop of an NVTX range pushed with such a
        name (torch.cuda.nvtx.range is push and pop). Counted after the range has closed, so that the ProfilerStep
        ranges enclose the script's own."""
        from pyprof.prof.step_marker import StepMarker

        rf = torch.autograd.profiler.record_function
        original_exit = rf.__exit__
        marker = StepMarker(self.marker)

        def named(name) -> bool:
            return type(name) is str and marker.matches(name)

        def exit_(rf_self, *exc):
            try:
                return original_exit(rf_self, *exc)
            finally:
                if named(getattr(rf_self, "name", None)):
                    self._after_step(None, None, None)

        rf.__exit__ = exit_
        nvtx = torch.cuda.nvtx
        push, pop = nvtx.range_push, nvtx.range_pop
        names: list = []  # the script's open NVTX ranges (pushed through torch.cuda.nvtx), innermost last

        def range_push(msg, *a, **k):
            names.append(msg)
            return push(msg, *a, **k)

        def range_pop(*a, **k):
            try:
                return pop(*a, **k)
            finally:
                if names and named(names.pop()):
                    self._after_step(None, None, None)

        nvtx.range_push, nvtx.range_pop = range_push, range_pop
        self._nvtx = (push, pop)  # this module's own step ranges bypass the counting

    def _phase(self) -> str:
        """The phase (pyprof.nvtx.timing.PHASES) of the torch backend's step that just ended, the ``done``-th."""
        n, w, last = self.done, self.warmup, self.warmup + self.steps
        if n > w and (not self.steps or n <= last):
            return "captured"
        if n == w:
            return "skipped"  # the profiler's own warm-up step: it runs the profiler, its events dropped
        if self.steps and n == last + 1:
            return "skipped"  # the first step after the capture pays for ending it (the export)
        return "unprofiled"

    def _after_step(self, _optimizer, _args, _kwargs) -> None:
        self.done += 1
        if self.window is not None:
            self.window.boundary()
            return
        if self.timer is not None:
            self.timer.boundary(self._phase())
        if self.finished:
            return
        if self.done == self.warmup - 1:
            self._markers(True)  # the next step is the profiler's warm-up
        self.prof.step()

    def _export(self, prof) -> None:
        prof.export_chrome_trace(self.trace)
        self.finished = True
        self._markers(False)

    def write_timing(self) -> None:
        """Write the step times for pyprof run (at exit: the steps after the capture are in). A device that cannot
        read its events any more leaves no file, and the report says no unprofiled step was measured."""
        if self.timer is None or not self.timing:
            return
        from pyprof.nvtx.timing import write

        try:
            write(self.timing, os.getpid(), self.timer.program())
        except (RuntimeError, OSError) as e:
            sys.stderr.write(f"pyprof run: the program's step times were not written: {e}\n")

    def finish(self) -> None:
        """End the capture (the measured steps are done, or the script ends: by itself, an error or Ctrl-C)."""
        if self.finished:
            return
        self.finished = True
        if self.done == 0:
            what = "no nn.Module was called" if self.forwards else \
                f"no range named {self.marker!r} closed" if self.marker else "no optimizer.step() ran"
            sys.stderr.write(f"pyprof run: no step was counted ({what}); for a loop without an optimizer, name its "
                             "step ranges with --step-marker NAME\n")

        if self.prof is not None:
            self.prof.stop()
            if not os.path.exists(self.trace):  # stopped before its window closed: what was recorded
                try:
                    self.prof.export_chrome_trace(self.trace)
                except (RuntimeError, AssertionError):  # torch's word for it differs by version
                    pass  # nothing was recorded (the script ended during warm-up)
            self._markers(False)
            return
        if self.window is not None:
            self.window.finish()

    def at_exit(self) -> None:
        self.finish()
        self.write_timing()


def _boot() -> None:
    backend = os.environ.get("PYPROF_RUN_BACKEND")
    if not backend or os.environ.get("PYPROF_RUN_ACTIVE"):
        return
    os.environ["PYPROF_RUN_ACTIVE"] = str(os.getpid())  # the script's children leave the capture to it
    steps = _Steps(backend, int(os.environ.get("PYPROF_RUN_WARMUP", "0")),
                   int(os.environ.get("PYPROF_RUN_STEPS", "0")), os.environ.get("PYPROF_RUN_TRACE", "trace.json"),
                   os.environ.get("PYPROF_RUN_STEP_MARKER"), os.environ.get("PYPROF_RUN_TIMING"),
                   os.environ.get("PYPROF_RUN_FORWARD_STEPS") == "1")
    try:
        steps.start()
    except ImportError as e:  # an interpreter without torch (or pyprof): the script runs, nothing is captured
        sys.stderr.write(f"pyprof run: nothing to capture in {sys.executable}: {e}\n")


_capture_packages()  # in every interpreter the script starts: what it unpickles may name pyprof
_boot()
_chain()
