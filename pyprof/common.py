"""What the stages share besides the record (pyprof.record): the error root, opening inputs and writing outputs
whole or not at all, turning errors into one line and an exit code, the decompression guard, and the two helpers
of their hot paths (``no_cyclic_gc``, ``BoundedDict``).

Nothing here imports torch.
"""
from __future__ import annotations

import contextlib
import gc
import errno
import io
import itertools
import os
import select
import stat
import sys
from typing import IO, TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from pyprof import cleanup
from pyprof.cleanup import Interrupted, handling_signals, stop_raising

if TYPE_CHECKING:  # the capture stage imports this module; argparse is only the CLIs'
    import argparse

class PyprofError(Exception):
    """Root of every error pyprof raises on purpose (bad input, bad usage).

    The CLI turns one of these into a single line on stderr and a non-zero exit; anything else
    that escapes is a bug and keeps its traceback.
    """


class _FileError(PyprofError):
    """A problem with one file: the message is the file's path, then the problem."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):  # pickled as raised (a worker process's, a Dask task's): the message is built again
        return type(self), (self.path, self.problem)


class InputError(_FileError):
    """An input file is unreadable, of an unknown format, truncated or malformed."""


class UsageError(PyprofError):
    """The command line or an API call asked for something impossible (exit code 2). ``path``: the file the
    message names, if any (an error line cuts a long one in its middle)."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path

    def __reduce__(self):
        return UsageError, (str(self), self.path)


class OutputError(_FileError):
    """An output cannot be written: a missing or read-only folder, a full disk (exit code 1)."""


def open_input(path: str, mode: str = "r") -> IO:
    """Open ``path`` for reading, ``-`` meaning stdin. Raises InputError if it cannot be opened."""
    if path == "-":
        return sys.stdin.buffer if "b" in mode else sys.stdin
    try:
        return open(path, mode)
    except OSError as e:
        raise InputError(path, f"cannot open: {e.strerror}") from None


class WholeWrites(io.RawIOBase):
    """A binary sink that takes every byte it is given or raises OSError: a short write (a disk that fills, a
    file size limit, a signal) is followed by another for the rest, which then succeeds or fails with the reason.

    Why: under ``python -u`` or PYTHONUNBUFFERED, sys.stdout writes straight to its descriptor and drops the count
    of a short write (``write(1, ..., 75923) = 16384`` on a 16 kB tmpfs, exit 0 and no message). ``sink`` is a
    file descriptor (a full non-blocking one is waited for), or a binary stream (a test's stand-in for stdout).
    Closing this leaves the sink open."""

    def __init__(self, sink: int | IO[bytes]) -> None:
        self._sink = sink
        self.error: OSError | None = None  # the first write that failed, also where a caller swallowed it (argparse)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sink if isinstance(self._sink, int) else self._sink.fileno()

    def isatty(self) -> bool:
        return os.isatty(self.fileno()) if isinstance(self._sink, int) else self._sink.isatty()

    def write(self, b) -> int:
        view = memoryview(b).cast("B")
        done = 0
        while done < len(view):
            try:
                n = os.write(self._sink, view[done:]) if isinstance(self._sink, int) else self._sink.write(view[done:])
            except BlockingIOError:
                if not isinstance(self._sink, int):
                    raise
                select.select([], [self._sink], [])
                continue
            except OSError as e:
                self.error = self.error or e
                raise
            if not n:  # a write that takes nothing and says nothing: stop rather than spin
                self.error = self.error or OSError(errno.EIO, "the output took no bytes")
                raise self.error
            done += n
        return done


def text_stdout(encoding: str | None = "utf-8") -> IO[str]:
    """stdout as a text stream with a large buffer, whose every write is whole or raises OSError (WholeWrites).
    ``encoding`` None: sys.stdout's own. What sys.stdout holds is flushed first, so it comes before. Closing the
    stream leaves stdout open; an object without a descriptor or a buffer (a notebook's) is returned as it is."""
    if sys.stdout is None:  # started with its descriptor closed (>&-)
        raise OSError(errno.EBADF, "stdout is closed")
    sys.stdout.flush()
    try:
        sink: int | IO[bytes] = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # a stand-in for stdout (tests, notebooks)
        if not hasattr(sys.stdout, "buffer"):
            return sys.stdout
        sink = sys.stdout.buffer
    out = io.TextIOWrapper(WholeWrites(sink), encoding=encoding or sys.stdout.encoding,
                           errors="strict" if encoding else sys.stdout.errors, write_through=False)
    out._CHUNK_SIZE = 1 << 20  # buffered here: WholeWrites has no buffer of its own
    return out


def write_error(e: OSError) -> str:
    """What an output error says after the file's name: ``could not write the output (No space left on device)``."""
    return f"could not write the output ({e.strerror or e})"


def write_stdout(chunks: Iterable[str], encoding: str | None = None) -> None:
    """Write ``chunks`` to stdout, whole, and flush. Raises OutputError naming ``<stdout>`` when stdout cannot take
    them (a full disk); stdout then points at /dev/null, so that the interpreter's last flush does not complain
    again. A reader that went away stays a BrokenPipeError."""
    try:
        out = text_stdout(encoding)
        try:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
        finally:
            if out is not sys.stdout:
                out.close()  # leaves stdout open; what failed is not written again
    except BrokenPipeError:
        raise
    except OSError as e:
        stdout_to_devnull()
        raise OutputError("<stdout>", write_error(e)) from None


class TellingWrites:
    """A text stream whose failed write or flush is an OutputError: ``display: what`` with the system's reason
    in place of ``{reason}``. For a file that a
    library function writes (parse_file into a temporary), whose OSError would otherwise escape as a traceback,
    or be told as the failure of another file."""

    def __init__(self, stream: IO[str], display: str, what: str) -> None:
        self._stream, self._display, self._what = stream, display, what

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except OSError as e:
            raise OutputError(self._display, self._what.format(reason=e.strerror or e)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise OutputError(self._display, self._what.format(reason=e.strerror or e)) from None


#: What TellingWrites says of the temporary records of an export parsed on the way (report, diff, prof --view ranks).
PARSED_EXPORT_HELD = "could not hold the parsed export in this folder ({reason}); set TMPDIR to one with room"


def stdout_to_devnull() -> None:
    """Point stdout's descriptor at /dev/null: after it failed (or its reader went away), what is still buffered
    for it would fail again at the interpreter's exit, with a second complaint."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # stdout replaced by an object without a descriptor, or None
        pass


def _regular_stat(path: str) -> os.stat_result | None:
    """``path``'s status ('-' is stdin's) when it is a regular file (through symlinks), else None."""
    try:
        st = os.fstat(sys.stdin.fileno()) if path == "-" else os.stat(path)
    except (AttributeError, OSError, ValueError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def refuse_overwriting_inputs(outputs: Iterable[str], inputs: Iterable[str]) -> None:
    """Raise UsageError when an output is one of the inputs: the same regular file (device and inode) whatever
    the names say (a symlink, a hard link, ``./x``). Writing it would replace the input. An output '-' is
    stdout (``>> net.dict``), an input '-' stdin. Called before any work."""
    ins = {}
    for path in inputs:
        st = _regular_stat(path)
        if st is not None:
            ins.setdefault((st.st_dev, st.st_ino), path)
    for out in outputs:
        if out == "-":
            try:
                st = os.fstat(sys.stdout.fileno())
            except (AttributeError, OSError, ValueError):  # no descriptor: nothing to compare
                continue
            st = st if stat.S_ISREG(st.st_mode) else None
        else:
            st = _regular_stat(out)
        given = None if st is None else ins.get((st.st_dev, st.st_ino))
        if given is not None:
            shown = "<stdout>" if out == "-" else out
            also = "" if given == out != "-" else f" ({'<stdin>' if given == '-' else given})"
            raise UsageError(f"{shown}: is also an input{also}: writing it would destroy the input; write the output "
                             "to another file", path=shown)


def _new_file_mode(path: str) -> int:
    """The mode a file written with open() would have: an existing file's, else 0666 less the umask."""
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    umask = os.umask(0)  # the only way to read it; set back at once
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def output_stream(path: str) -> Iterator[IO[str]]:
    """A text stream to ``path`` ('-' is stdout, written whole: text_stdout), for a command's output.

    A regular file is written to a temporary file beside it and renamed into place when the body finishes, so
    a failure (of the body or of the disk) leaves no file and no temporary; the file gets the mode open() would
    give it (the existing file's, else 0666 less the umask). A symbolic link is written through: its target is
    replaced, the link stays. A device or a pipe (``-o /dev/null``) is written in place, since renaming over it
    would replace the device node. Raises OutputError naming the path for what the system refuses (a missing or
    read-only folder, a folder, a full disk); a reader of stdout that went away stays a BrokenPipeError."""
    display = "<stdout>" if path == "-" else path
    target = os.path.realpath(path) if path != "-" and os.path.islink(path) else path
    special = path != "-" and os.path.exists(target) and not os.path.isfile(target)
    tmp = None
    try:
        if path == "-":
            out = text_stdout()
        elif os.path.isdir(target):
            raise OutputError(display, "is a folder, not a file")
        elif special:
            out = open(target, "w", encoding="utf-8", buffering=1 << 20)
        else:
            mode = _new_file_mode(target)
            fd, tmp = cleanup.temp_file(".pyprof-", folder=os.path.dirname(os.path.abspath(target)))
            try:
                os.fchmod(fd, mode)  # mkstemp's file is private to its writer (0600)
                out = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 20)
            except OSError:
                os.close(fd)
                raise
    except OSError as e:
        if tmp is not None:
            cleanup.remove(tmp)
        raise OutputError(display, f"cannot write here ({e.strerror or e})") from None
    try:
        yield out
        out.flush()
        if tmp is not None:
            out.close()
            cleanup.rename_into_place(tmp, target)
            tmp = None
    except BrokenPipeError:
        raise
    except OSError as e:
        if path == "-":
            stdout_to_devnull()
        raise OutputError(display, write_error(e)) from None
    finally:
        if path == "-":
            try:
                out.flush()  # what was written before a failure of the input (parse's records so far)
            except OSError:
                pass  # the error, if any, is being raised already
        if out is not sys.stdout:
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


def parsed_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The command line parsed, or the exit code where argparse has printed the usage or the help instead (2 for a
    usage error, 0 for --help)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0


def run_command(prog: str, body: Callable[[], int]) -> int:
    """Run a command's body and turn pyprof's own errors into one line on stderr (error_line) and an exit code.

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
        stdout_to_devnull()  # nothing more can be written, and Python would complain at exit when flushing stdout
        return 0
    except UsageError as e:
        print(error_line(prog, e), file=sys.stderr)
        return 2
    except PyprofError as e:
        print(error_line(prog, e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run_main(prog: str, main: Callable[[], int]) -> None:
    """A command's process: run ``main`` with sys.stdout's every write whole or an error (WholeWrites under it:
    print, argparse's help), then exit with its code, after flushing stdout here, where a failure can still be
    told and change the exit code: the interpreter's own flush at exit says nothing of a short write, argparse
    swallows a failed one, and a failed flush at exit becomes exit status 120. For ``python -m pyprof.STAGE``
    and the ``pyprof`` command; main() itself, called from Python, leaves sys.stdout alone."""
    sink = None
    try:
        old = sys.stdout
        fd = old.fileno()
        old.flush()
        sink = WholeWrites(fd)
        sys.stdout = io.TextIOWrapper(sink, encoding=old.encoding, errors=old.errors,
                                      line_buffering=old.line_buffering, write_through=old.write_through)
    except (AttributeError, ValueError, OSError):  # no descriptor, or already failing: the command will tell
        pass
    code = main()
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        if sink is not None and sink.error is not None:
            raise sink.error
    except BrokenPipeError:
        stdout_to_devnull()
    except OSError as e:
        stdout_to_devnull()
        print(error_line(prog, OutputError("<stdout>", write_error(e))), file=sys.stderr)
        code = code or 1
    sys.exit(code)


#: A command's error message is one line of at most this many characters (it can quote the input).
MESSAGE_CHARS = 1000
#: A file name in an error line is cut in its middle to this many characters, so that the problem stays.
MESSAGE_PATH_CHARS = 400


def error_line(prog: str, e: PyprofError) -> str:
    """``prog: error: message`` as one printable line of at most MESSAGE_CHARS characters, whatever the message
    quotes (a name holding a line break, a path of 6000 characters, a megabyte line): the file the error names
    (its ``path``) is cut in its middle, so that its start, its own name and what was wrong stay."""
    text = str(e)
    path = getattr(e, "path", None)
    if isinstance(path, str) and path and path in text:
        text = text.replace(path, _middle(printable(path), MESSAGE_PATH_CHARS))
    line = printable(f"{prog}: error: {text}")
    return _middle(line, MESSAGE_CHARS)


def _middle(s: str, n: int) -> str:
    """``s``, or when longer than ``n`` characters its start and its end with '...' between, ``n`` in all."""
    if len(s) <= n:
        return s
    head = (n - 3) // 2
    return f"{s[:head]}...{s[len(s) - (n - 3 - head):]}"


#: Text for people (prof's text formats, the report's strings) cuts a string longer than this to this many
#: characters, followed by a marker saying how many more there were. Real kernel names are a few kB (the longest
#: CUTLASS template instantiations about 10 kB); a name of megabytes (a corrupt export's) would make one row of
#: megabytes, and every column of -w as wide.
MAX_FIELD_CHARS = 1 << 16

_ESCAPES: dict[str, str] = {}


def _escape(c: str) -> str:
    e = _ESCAPES.get(c)
    if e is None:
        # Python's own escape of a character it does not print: \t \n \r \x1b \x85 \u2028 \U000e0001.
        e = _ESCAPES[c] = repr(c)[1:-1]
    return e


def bounded(s: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``s``, or when longer than ``limit`` characters its first ``limit`` followed by ``...[N more characters]``."""
    return s if len(s) <= limit else f"{s[:limit]}...[{len(s) - limit} more characters]"


def printable(s: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``s`` as one line of plain text: cut to ``limit`` characters followed by ``...[N more characters]`` when
    longer, and every character that ``str.isprintable`` refuses (C0 and C1 controls, DEL, line and paragraph
    separators, format characters such as the bidirectional overrides, spaces other than U+0020, surrogates,
    unassigned code points) written as Python escapes it (``\\n``, ``\\x1b``, ``\\u2028``). A backslash is
    printed as it is: the escapes are for reading, not for decoding back."""
    s = bounded(s, limit)
    if s.isprintable():
        return s
    return "".join([c if c.isprintable() else _escape(c) for c in s])


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
