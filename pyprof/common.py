"""What the stages share besides the record (pyprof.record): the error root, opening inputs and writing outputs
whole or not at all, turning errors into one line and an exit code, the decompression guard, and the two helpers
of their hot paths (``no_cyclic_gc``, ``BoundedDict``).

Nothing here imports torch.
"""
from __future__ import annotations

import contextlib
import gc
import io
import itertools
import os
import sys
from typing import IO, Callable, Iterator

from pyprof import cleanup
from pyprof.cleanup import Interrupted, handling_signals, stop_raising

class PyprofError(Exception):
    """Root of every error pyprof raises on purpose (bad input, bad usage).

    The CLI turns one of these into a single line on stderr and a non-zero exit; anything else
    that escapes is a bug and keeps its traceback.
    """


class InputError(PyprofError):
    """An input file is unreadable, of an unknown format, truncated or malformed."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):  # pickled as raised (a worker process's, a Dask task's): the message is built again
        return InputError, (self.path, self.problem)


class UsageError(PyprofError):
    """The command line or an API call asked for something impossible (exit code 2)."""


class OutputError(PyprofError):
    """An output cannot be written: a missing or read-only folder, a full disk (exit code 1)."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):  # pickled as raised (a worker process's, a Dask task's): the message is built again
        return OutputError, (self.path, self.problem)


def open_input(path: str, mode: str = "r") -> IO:
    """Open ``path`` for reading, ``-`` meaning stdin. Raises InputError if it cannot be opened."""
    if path == "-":
        return sys.stdin.buffer if "b" in mode else sys.stdin
    try:
        return open(path, mode)
    except OSError as e:
        raise InputError(path, f"cannot open: {e.strerror}") from None


def text_stdout() -> IO[str]:
    """stdout as a text stream with a large buffer: records are written line by line.

    The wrapper shares sys.stdout's buffer: the caller must ``detach()`` it when done, or collecting the
    wrapper closes stdout itself."""
    return io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=False, line_buffering=False) \
        if hasattr(sys.stdout, "buffer") else sys.stdout


@contextlib.contextmanager
def output_stream(path: str) -> Iterator[IO[str]]:
    """A text stream to ``path`` ('-' is stdout), for a command's output.

    A regular file is written to a temporary file beside it and renamed into place when the body finishes, so
    a failure (of the body or of the disk) leaves no file and no temporary; a device or a pipe (``-o
    /dev/null``) is written in place, since renaming over it would replace the device node. Raises OutputError
    naming the path for what the system refuses (a missing or read-only folder, a folder, a full disk); a reader
    of stdout that went away stays a BrokenPipeError."""
    display = "<stdout>" if path == "-" else path
    special = path != "-" and os.path.exists(path) and not os.path.isfile(path)
    tmp = None
    try:
        if path == "-":
            out = text_stdout()
        elif os.path.isdir(path):
            raise OutputError(display, "is a folder, not a file")
        elif special:
            out = open(path, "w", encoding="utf-8", buffering=1 << 20)
        else:
            fd, tmp = cleanup.temp_file(".pyprof-", folder=os.path.dirname(os.path.abspath(path)))
            out = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 20)
    except OSError as e:
        raise OutputError(display, f"cannot write here ({e.strerror or e})") from None
    try:
        yield out
        out.flush()
        if tmp is not None:
            out.close()
            cleanup.rename_into_place(tmp, path)
            tmp = None
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError(display, f"cannot write ({e.strerror or e})") from None
    finally:
        if path == "-":
            if out is not sys.stdout:
                # text_stdout() wraps sys.stdout.buffer: detach, or collecting the wrapper closes stdout.
                try:
                    out.flush()
                except OSError:
                    pass  # the error, if any, is being raised already
                out.detach()
        else:
            try:
                out.close()
            except OSError:
                pass
            if tmp is not None:
                cleanup.remove(tmp)


_BLAS_THREADS = "OPENBLAS_NUM_THREADS"
_blas_setting_ours = False  # one_blas_thread set it (the user had not): the programs a command runs do not get it


def one_blas_thread() -> None:
    """Keep numpy's BLAS to one thread. The commands use numpy for a few vector operations, never its BLAS. An
    OpenBLAS build starts a thread per core when numpy is first imported (again in each forked worker), and they
    spin a while before they sleep: on the 16-core H200 machine that was 2-4 s of CPU for a 2.5 s parse. OpenBLAS
    reads the setting once, as numpy loads it, so a command calls this before it imports its stage (pyprof.cli, and
    each stage's package under ``python -m``); run_command calls it too, for a caller that imported nothing yet. A
    setting of the user's own is kept."""
    global _blas_setting_ours
    if _BLAS_THREADS not in os.environ:
        os.environ[_BLAS_THREADS] = "1"
        _blas_setting_ours = True


def users_environment() -> dict[str, str]:
    """The environment as the user gave it, for a program a command runs (``pyprof run``'s script): without the
    BLAS setting one_blas_thread made for pyprof's own process."""
    env = dict(os.environ)
    if _blas_setting_ours:
        env.pop(_BLAS_THREADS, None)
    return env


def one_blas_thread_if_run(package: str) -> None:
    """one_blas_thread() when this process is ``python -m <package>``: the interpreter imports the package, and
    numpy with it, before it runs the package's ``__main__``. A stage's package calls this first."""
    argv = getattr(sys, "orig_argv", [])
    if any(a == f"-m{package}" or (a == "-m" and argv[i + 1:i + 2] == [package]) for i, a in enumerate(argv)):
        one_blas_thread()
        cleanup.while_loading(package.replace(".", " "))  # a signal during the imports: one line, no traceback


def run_command(prog: str, body: Callable[[], int]) -> int:
    """Run a command's body and turn pyprof's own errors into one line on stderr and an exit code.

    Returns the body's code; 2 for a UsageError, 1 for any other PyprofError (bad input), 128 + the signal's
    number when SIGINT, SIGTERM or SIGHUP stopped it (130, 143, 129; one line on stderr, every temporary removed:
    pyprof.cleanup), 0 when the reader of stdout went away (``| head``). Other exceptions are bugs and keep their
    traceback.
    """
    one_blas_thread()
    with handling_signals() as outermost:
        return _run_body(prog, body, outermost)


def _run_body(prog: str, body: Callable[[], int], outermost: bool) -> int:
    try:
        try:
            return body()
        finally:
            if outermost:
                stop_raising()  # a signal from here on does not cut the line being printed: the work has ended
    except Interrupted as e:  # SIGINT, SIGTERM or SIGHUP (pyprof.cleanup): the way out removed the temporaries
        if not outermost:
            raise  # a command run by another: the outer one says it, once
        print(f"{prog}: interrupted ({e.signal_name})", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        # Nothing more can be written, and Python would complain at exit when flushing stdout.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
            pass
        return 0
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except PyprofError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


#: Real exports and traces expand 10-30 times when decompressed (measured on the corpus: at most 30x); past
#: FREE_EXPANSION_BYTES, an input that expands more than MAX_EXPANSION times is refused as a decompression bomb
#: rather than filling the disk (an SQLite export) or memory (a trace).
MAX_EXPANSION = 100
FREE_EXPANSION_BYTES = 1 << 30


def expansion_cap(path: str) -> int:
    """The most bytes the compressed file ``path`` may decompress to."""
    return max(FREE_EXPANSION_BYTES, MAX_EXPANSION * os.path.getsize(path))


def too_expanded(display: str) -> InputError:
    return InputError(display, f"decompresses to more than {MAX_EXPANSION} times its size (real profiles expand "
                               "10-30 times): refused as a decompression bomb")


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the body, on again after (if it was on).

    What parse and prof make per activity are trees of tuples, strings and dicts, never cycles: on millions of
    them the collector's passes only cost time (10-20% of a parse or a prof run)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # What the body made and still holds (a parse's caches of decoded markers: 100k dicts and lists) is the
            # young generation now, and the next collection would walk it all (30 ms after a 50k-kernel parse).
            # It is old already: it goes to the oldest generation at once, as it would after two collections. Not
            # where the program has frozen objects of its own (unfreezing would hand those back to the collector).
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class BoundedDict(dict):
    """A dict of at most ``max_entries`` entries: every cache and window of the stages (capture, parse, prof,
    report) that is keyed by what the input holds.

    Why bounded: the stages stream inputs of millions of records in constant memory, and a dict keyed by kernel
    names, marker texts, argument lists or launch calls would otherwise grow with the input.

    The one eviction policy: entries stay in the order they were first added (setting a key again keeps its
    place); an :meth:`add` that takes the dict past ``max_entries`` drops the oldest ``max_entries // 2`` at once.
    So it always holds the newest ``max_entries // 2`` keys added. Caches of pure functions answer the same
    whatever is dropped; the windows whose contents decide an output (the attribution numbers a sweep worker
    and the writer both keep, forward ops remembered for backward links, launch calls kept for a CUDA graph's
    later kernels, launch slices already drawn) rely on the order: the oldest go first.

    Only :meth:`add` keeps the bound: ``d[key] = value`` is for replacing the value of a key already present.
    """

    __slots__ = ("max_entries",)

    def __init__(self, max_entries: int) -> None:
        super().__init__()
        self.max_entries = max_entries

    def add(self, key, value) -> None:
        """Set ``key`` to ``value``; past ``max_entries``, drop the oldest half."""
        self[key] = value
        if len(self) > self.max_entries:
            # The oldest half go at once: deleting one per add costs a scan past the holes that earlier deletions
            # left at the front of the dict (1-9 us an add once full, against 0.1 us so).
            for old in list(itertools.islice(self, max(1, self.max_entries // 2))):
                del self[old]
