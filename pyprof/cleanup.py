"""Temporary files removed however a command ends, and the signals that end one.

Every temporary a command makes (an output's temporary beside the target, stdin's spool, a decompressed export,
report's working folder) is made here and registered with the process that made it, and removed by whoever is done
with it (a ``finally``, a context manager). What a command leaves registered when it ends is removed by
:func:`handling_signals`'s exit: the safety net for an interruption that came between making a file and entering
the block that removes it.

SIGTERM and SIGHUP end a Python program at once by default, running no ``finally`` block; while a command runs
(``common.run_command``), they, and SIGINT, raise :class:`Interrupted` in the main thread instead, so the way out
removes what the way in made, and the command exits with 128 + the signal's number, as a shell reports a process
killed by it. A signal set to be ignored (``nohup``, a background job's SIGINT) stays ignored.

Worker processes (forked: parse's sweep process, prof's and report's ``--jobs`` workers, parse's ``-j`` pool) inherit
the handlers and the registry. In a worker SIGTERM and SIGHUP end it at once (their default), SIGINT is left to the
parent, which stops its workers when interrupted; the registry's entries of its parent are not its own: a worker
never removes its parent's files.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Iterator

#: The signals a command turns into :class:`Interrupted` (those a terminal, a service manager or ``kill`` send to
#: ask a program to stop).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: For tests and bench/signals.py: ``PYPROF_PAUSE_AT=NAME`` makes :func:`pause_point` NAME print a line on stderr
#: and wait there for a signal, at a point where temporaries exist (a real point, so no guess at a sleep's length).
PAUSE_ENV = "PYPROF_PAUSE_AT"


class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM or SIGHUP) asked the command to stop. A KeyboardInterrupt, so that what lets
    Ctrl-C through (``except Exception`` does not catch it) lets the others through too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal's number: what a shell shows for a process that a signal ended."""
        return 128 + self.signum


class _State:
    """This process's handling: who installed it (a forked worker is another pid), whether a signal may still
    raise, the first signal received, and the temporaries made (path -> the pid that made it)."""

    def __init__(self) -> None:
        self.owner_pid = 0
        self.active = False  # inside handling_signals
        self.armed = False  # a signal raises Interrupted (until the command's work has ended)
        self.received: int | None = None
        self.held = 0  # > 0: inside a step that must not be cut in two (make-and-register, rename-and-forget)
        self.owned: dict[str, int] = {}
        self.loading_prog = "pyprof"
        self.unraisablehook = sys.unraisablehook


_state = _State()


def _while_loading(signum: int, frame) -> None:
    # A signal while a command's modules load (before run_command): nothing made yet, nothing to remove; one line,
    # not the traceback of an import, nor a death by the signal (another exit status than the same signal later).
    print(f"{_state.loading_prog}: interrupted ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def while_loading(prog: str) -> None:
    """Until :func:`handling_signals` takes over: SIGINT, SIGTERM and SIGHUP end the process with 128 + the signal's
    number and one line naming ``prog``. For a command's start (``python -m pyprof.parse``, the ``pyprof``
    command), whose imports take most of a short run."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state.loading_prog = prog
    for signum in SIGNALS:
        if signal.getsignal(signum) is _default(signum):
            signal.signal(signum, _while_loading)


def _default(signum: int):
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


def _on_signal(signum: int, frame) -> None:
    if os.getpid() != _state.owner_pid:  # a forked worker
        if signum == signal.SIGINT:
            # Ctrl-C reaches the whole group: the parent stops its workers (with SIGTERM). A worker's own
            # KeyboardInterrupt would reach the parent as a failed task first, a bug's traceback.
            return
        remove_all()  # what the worker made itself (a rank's export decompressed, parsed), never its parent's
        signal.signal(signum, signal.SIG_DFL)  # then the signal's default: the worker ends at once
        os.kill(os.getpid(), signum)
        return
    if _state.received is None:
        _state.received = signum
        if _state.armed:
            # The workers stop now, whatever waits for them on the way out (a pool finishing its tasks first)
            _terminate_children()
    if _state.armed and not _state.held:
        raise Interrupted(signum)
    # one after the command's work: noted (interrupted() tells it), nothing more to do


def _swallowed(unraisable) -> None:
    # An Interrupted raised where Python can only print it and go on (a finalizer, a generator closed as it is freed,
    # a __del__): the command would run on to its end. The signal is sent again from a thread, a moment later: its
    # handler raises it anew in the main thread, once out of this hook (a signal handled in here would be swallowed
    # too) and most likely out of the finalizer.
    if isinstance(unraisable.exc_value, Interrupted) and _state.armed and os.getpid() == _state.owner_pid:
        threading.Thread(target=_send_again, args=(unraisable.exc_value.signum,), daemon=True).start()
        return
    _state.unraisablehook(unraisable)


def _send_again(signum: int) -> None:
    time.sleep(0.01)
    if _state.armed:
        os.kill(os.getpid(), signum)


def interrupted() -> int | None:
    """The signal that asked this command to stop, or None: workers are stopped at once rather than waited for."""
    return _state.received if os.getpid() == _state.owner_pid else None


@contextlib.contextmanager
def handling_signals() -> Iterator[bool]:
    """SIGINT, SIGTERM and SIGHUP raise Interrupted in the body (in the main thread; elsewhere this does nothing),
    and what the body left registered is removed when it ends. Nested uses are one: the outermost one handles, and
    yields True (the others False). After the body the handlers are given back, but in a command's own process
    (:func:`while_loading`), where they stay to note a late signal: the command has done its work, and its exit
    status is its outcome's, not a death by a signal with its output in place."""
    if threading.current_thread() is not threading.main_thread() or _state.active:
        yield False
        return
    previous = {}
    command = False
    # the state first: a signal that lands as the handlers go in is a command's, not a forked worker's
    _state.owner_pid, _state.active, _state.armed, _state.received = os.getpid(), True, True, None
    for signum in SIGNALS:
        handler = signal.getsignal(signum)
        command |= handler is _while_loading
        # Ignored (nohup, a background job) stays ignored; a handler of the caller's own is the caller's.
        if handler is _default(signum) or handler is _while_loading or handler is _on_signal:
            signal.signal(signum, _on_signal)
            previous[signum] = _default(signum)  # (what the loading used, it needs no more)
    _state.unraisablehook, sys.unraisablehook = sys.unraisablehook, _swallowed
    before = set(_state.owned)  # (a caller's own, made before the command: not the command's to remove)
    try:
        yield True
    finally:
        _state.armed = _state.active = False
        sys.unraisablehook = _state.unraisablehook
        remove_all(keep=before)
        if not command:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            _state.owner_pid = 0


def stop_raising() -> None:
    """From now on a signal is noted, not raised: the command's work has ended (its outcome is being told)."""
    if os.getpid() == _state.owner_pid:
        _state.armed = False


@contextlib.contextmanager
def _held() -> Iterator[None]:
    """A step a signal must not cut in two: a signal that comes during it raises when it ends. (Signals are handled
    in the main thread only: another thread's steps cannot be cut.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.held += 1
    try:
        yield
    finally:
        _state.held -= 1
        if not _state.held and _state.armed and _state.received is not None and os.getpid() == _state.owner_pid:
            raise Interrupted(_state.received)


def temp_file(prefix: str, suffix: str = "", folder: str | None = None) -> tuple[int, str]:
    """A new file (``tempfile.mkstemp``: private to its maker) in ``folder`` (default TMPDIR), registered for
    removal; returns its descriptor and path. Raises OSError as mkstemp does."""
    with _held():
        fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
        _state.owned[path] = os.getpid()
    return fd, path


def link_temp(source: str, name: str) -> str:
    """A hard link to ``source`` in TMPDIR named ``name`` (the same file under a shorter path, nothing copied),
    registered for removal; its path. Raises OSError as os.link does (another file system, links not allowed)."""
    path = os.path.join(tempfile.gettempdir(), name)
    with _held():
        os.link(source, path)
        _state.owned[path] = os.getpid()
    return path


def temp_folder(prefix: str) -> str:
    """A new folder in TMPDIR (``tempfile.mkdtemp``), registered for removal with all it will hold; its path."""
    with _held():
        path = tempfile.mkdtemp(prefix=prefix)
        _state.owned[path] = os.getpid()
    return path


@contextlib.contextmanager
def temporary_folder(prefix: str) -> Iterator[str]:
    """:func:`temp_folder` as a context manager: removed, with what it holds, when the body ends."""
    path = temp_folder(prefix)
    try:
        yield path
    finally:
        remove(path)


def remove(path: str) -> None:
    """Remove the temporary ``path`` (a file or a folder) if it is still there, and forget it."""
    _state.owned.pop(path, None)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def rename_into_place(path: str, target: str) -> None:
    """Rename the temporary ``path`` to ``target`` (``os.replace``): from then on it is the user's, not removed.
    Raises OSError as os.replace does."""
    with _held():
        os.replace(path, target)
        _state.owned.pop(path, None)


def remove_all(keep: set = frozenset()) -> None:
    """Remove every temporary this process made and still holds, but those in ``keep`` (never those a parent
    registered before a fork)."""
    me = os.getpid()
    for path, pid in list(_state.owned.items()):
        if pid == me and path not in keep:
            remove(path)


def _terminate_children() -> None:
    """SIGTERM to the worker processes this process started (multiprocessing's: forked ones and pools' alike), which
    ends each at once, its own temporaries removed (see the module's docstring); whoever started them waits for
    them. For an interrupted command, whose workers would otherwise finish the task in hand first."""
    import multiprocessing

    for child in multiprocessing.active_children():
        try:
            child.terminate()
        except OSError:  # (it has just ended)
            pass


def pause_point(name: str) -> None:
    """Where ``PYPROF_PAUSE_AT`` names this point: say so on stderr and wait for a signal (tests, the bench)."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    print(f"pyprof: paused at {name}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 60  # a test that never sends its signal does not hang
    while time.monotonic() < deadline:
        time.sleep(0.05)
