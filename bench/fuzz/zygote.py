"""A fork server: one process that has imported the commands' modules once, and forks a child per run.

Starting ``python -m pyprof.<stage>`` costs about 0.2 s of imports (numpy, the op registry, the views) before
any work; a small seed then takes as long again. The zygote pays the imports once: each run is a fork of a
process that has done nothing else, running ``runpy.run_module("pyprof.<stage>")`` as ``python -m`` does, with
its own working folder, environment, stdout and stderr, limits, process group and peak RSS (``wait4``). It
imports pyprof only by module name (every module but the capture side, which needs torch), so it still
measures whatever the code becomes. A child's peak RSS includes the zygote's pages (about 60 MB against 20 to
30 MB for a fresh process), so the 500 MB bound is if anything stricter here. ``fuzz_run.py --exec`` runs real
``python -m`` processes instead.

Protocol: one JSON request per line on stdin, one JSON reply per line on stdout.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time


class _NoTorch:
    """A meta path finder that keeps torch out of the zygote (a child that needs it imports it itself)."""

    hit = False

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            _NoTorch.hit = True
            raise ImportError("torch is not preloaded")
        return None


def _preload() -> None:
    """Import every pyprof module but the capture side; one that reaches for torch is forgotten again, with all
    it imported, so that a child imports it afresh (and torch with it) exactly as a new process would."""
    import importlib
    import pkgutil

    import pyprof

    blocker = _NoTorch()
    sys.meta_path.insert(0, blocker)
    try:
        for m in pkgutil.walk_packages(pyprof.__path__, "pyprof."):
            if m.name.startswith("pyprof.nvtx") or m.name.endswith("__main__") or m.name in sys.modules:
                continue
            before = set(sys.modules)
            _NoTorch.hit = False
            try:
                importlib.import_module(m.name)
            except Exception:  # a module that cannot import is the command's to report, when it runs
                pass
            if _NoTorch.hit:
                for name in set(sys.modules) - before:
                    del sys.modules[name]
    finally:
        sys.meta_path.remove(blocker)


def _child(req: dict) -> None:
    """In the forked child: become ``python -m pyprof.<stage> *argv`` and exit as the interpreter would."""
    import io
    import runpy
    import tempfile
    import traceback

    code = 1
    try:
        os.setsid()
        cap_as, cap_fsize = req["caps"]
        resource.setrlimit(resource.RLIMIT_AS, (cap_as, cap_as))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap_fsize, cap_fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start-up
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None
        fd_in = os.open(os.devnull, os.O_RDONLY)
        fd_out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fd_err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for fd, target in ((fd_in, 0), (fd_out, 1), (fd_err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        sys.argv = [f"-m pyprof.{req['stage']}", *req["argv"]]
        try:
            runpy.run_module(f"pyprof.{req['stage']}", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        try:  # what the interpreter does at exit: a failed flush of stdout is reported, exit status 120
            sys.stdout.flush()
        except Exception:
            print("Exception ignored on flushing sys.stdout:", file=sys.stderr)
            traceback.print_exc()
            code = 120
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else 1)


def serve() -> None:
    _preload()
    requests, replies = sys.stdin, sys.stdout
    for line in requests:
        req = json.loads(line)
        replies.flush()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(req)
        killed = threading.Event()

        def kill(pid=pid):
            killed.set()
            _killpg(pid)

        timer = threading.Timer(req["timeout"], kill)
        timer.start()
        try:
            _, status, usage = os.wait4(pid, 0)
        finally:
            timer.cancel()
        _killpg(pid)
        replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "killed": killed.is_set(),
                                  "rss_kb": usage.ru_maxrss, "wall_s": time.monotonic() - t0,
                                  "cpu_s": usage.ru_utime + usage.ru_stime}) + "\n")
        replies.flush()


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Zygote:
    """The parent's handle: ``run(request) -> reply``; started lazily, restarted if it dies."""

    def __init__(self, python: str, env: dict):
        self.python, self.env, self.proc = python, env, None

    def run(self, req: dict) -> dict:
        import subprocess

        for _ in range(2):
            if self.proc is None or self.proc.poll() is not None:
                self.proc = subprocess.Popen([self.python, "-m", "bench.fuzz.zygote"], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, env=self.env, text=True,
                                             cwd=self.env["PYPROF_FUZZ_ROOT"])
            try:
                self.proc.stdin.write(json.dumps(req) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except BrokenPipeError:
                line = ""
            if line:
                return json.loads(line)
            self.close()
        raise RuntimeError("the fork server died twice in a row")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


if __name__ == "__main__":
    serve()
