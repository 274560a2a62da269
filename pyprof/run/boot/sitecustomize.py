"""Loaded by the Python interpreter that ``pyprof run`` starts (its folder is first on PYTHONPATH), before the
user's script: turns on what the chosen capture needs, counts the training steps by the optimizers' steps, and
keeps to the measured ones. Does nothing in any other process (a DataLoader worker, a subprocess), and then
loads the environment's own sitecustomize, if any. Settings come from PYPROF_RUN_* variables (pyprof.run.cli).
"""
import atexit
import functools
import importlib.machinery
import importlib.util
import os
import sys


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
    them."""

    def __init__(self, backend: str, warmup: int, steps: int, trace: str) -> None:
        self.backend, self.warmup, self.steps, self.trace = backend, warmup, steps, trace
        self.done = 0  # optimizer steps so far
        self.open = False
        self.finished = False
        self.prof = None

    def start(self) -> None:
        import torch

        if self.backend == "nsys":
            import pyprof

            pyprof.init()
            if self.warmup == 0:
                self._begin(torch)
        else:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            # a schedule in both cases, so that each step is a ProfilerStep range; --steps 0: every step after the
            # warm-up, exported when the script ends
            schedule = torch.profiler.schedule(wait=0, warmup=self.warmup, active=self.steps or 2 ** 31 - 1,
                                               repeat=1)
            self.prof = torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True,
                                               with_stack=True, with_modules=True, profile_memory=True,
                                               on_trace_ready=self._export)
            self.prof.start()
        if self.backend == "nsys" and hasattr(torch.optim.Optimizer, "profile_hook_step"):
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
        atexit.register(self.finish)

    def _begin(self, torch) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        self._range(torch)

    def _range(self, torch) -> None:
        if self.open:
            torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push(f"ProfilerStep#{self.done - self.warmup}")
        self.open = True

    def _after_step(self, _optimizer, _args, _kwargs) -> None:
        import torch

        self.done += 1
        if self.finished:
            return
        if self.backend != "nsys":
            self.prof.step()
            return
        if self.done == self.warmup:
            self._begin(torch)
        elif self.done > self.warmup:
            if self.steps and self.done >= self.warmup + self.steps:
                self.finish()
            else:
                self._range(torch)

    def _export(self, prof) -> None:
        prof.export_chrome_trace(self.trace)
        self.finished = True

    def finish(self) -> None:
        """End the capture (the measured steps are done, or the script ends: by itself, an error or Ctrl-C)."""
        if self.finished:
            return
        self.finished = True
        import torch

        if self.prof is not None:
            self.prof.stop()
            if not os.path.exists(self.trace):  # stopped before its window closed: what was recorded
                try:
                    self.prof.export_chrome_trace(self.trace)
                except RuntimeError:
                    pass  # nothing was recorded (the script ended during warm-up)
            return
        if self.open:
            torch.cuda.nvtx.range_pop()
            self.open = False
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()


def _boot() -> None:
    backend = os.environ.get("PYPROF_RUN_BACKEND")
    if not backend or os.environ.get("PYPROF_RUN_ACTIVE"):
        return
    os.environ["PYPROF_RUN_ACTIVE"] = str(os.getpid())  # the script's children leave the capture to it
    _Steps(backend, int(os.environ.get("PYPROF_RUN_WARMUP", "0")), int(os.environ.get("PYPROF_RUN_STEPS", "0")),
           os.environ.get("PYPROF_RUN_TRACE", "trace.json")).start()


_boot()
_chain()
