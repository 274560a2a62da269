"""The text of a user's source line, for the lines view and the recommendations, read only where the user said.

A record's call site (``file:line``) is written by whoever made the profile, so it is untrusted: a profile that
names ``/proc/self/environ`` must not put the reader's environment into a page they then share, nor ``/dev/zero``
or a FIFO stop the command. Source text is read only from the *source roots*, folders the user named
(``--source-root DIR``; by default the folder the command runs in), and only from Python files there:

- the recorded path when, resolved (symlinks followed), it lies under a root; else the path's trailing parts
  looked up under each root, longest first (``/home/u/proj/examples/t.py`` -> ``ROOT/examples/t.py``): paths
  are absolute paths on the capture machine. A path outside every root is never opened, nor even looked at: a
  candidate must lie under a root as written (``..`` collapsed) before any system call, and again once resolved,
  so ``../`` and a symlink out of a root are refused;
- only a name ending ``.py`` (as recorded and as resolved), opened without following a final symlink and without
  blocking, and read only when it is a regular file;
- at most MAX_FILE_BYTES of a file (and of its size as stat gives it: a /proc file says 0), at most
  MAX_TOTAL_BYTES over all files, MAX_PATHS distinct paths looked up, and a line shown is cut at MAX_LINE_CHARS.

Lines whose text is not shown are counted by reason, for the one note a view prints (``note``)."""
from __future__ import annotations

import os
import stat
from collections import Counter
from typing import Iterable, Iterator, Sequence

from pyprof.common import UsageError
from pyprof.common import bounded

#: The part of one source file that is read: a line past it is not shown (real sources are a few hundred kB).
MAX_FILE_BYTES = 4 << 20
#: What all the source files read together may take (each is kept in memory, as lines, for the command's life).
MAX_TOTAL_BYTES = 64 << 20
#: A line's text is shown cut to this many characters (the rest counted): a minified file has lines of megabytes.
MAX_LINE_CHARS = 500
#: A recorded path longer than this is no file's (Linux's PATH_MAX): it is not looked up.
MAX_PATH_CHARS = 4096
#: The trailing parts of a recorded path tried under each root, at most this many parts long: bounds the
#: lookups a path of thousands of parts would cost (a real project is not that deep).
MAX_SUFFIX_PARTS = 16
#: Distinct recorded paths looked up at most (each costs a stat per candidate): a real profile names tens to
#: hundreds of files; one naming hundreds of thousands would otherwise cost minutes of lookups.
MAX_PATHS = 4096
#: The only files read: Python source, the files a call site names.
SOURCE_SUFFIX = ".py"

# Why a line's text is not shown (the note's words, counted per line).
OUTSIDE = "outside the source roots or not found under them"
NOT_PYTHON = "not in a Python source file (.py)"
NOT_REGULAR = "in a file that is not a regular file"
UNREADABLE = "in a file that could not be read"
CUT = f"past the first {MAX_FILE_BYTES >> 20} MiB of their file (not read)"
OVER_BUDGET = f"past the {MAX_TOTAL_BYTES >> 20} MiB of source read in all (not read)"
OUT_OF_RANGE = "with a line number outside their file"
_BAD_PATH = "in a path no file can have (a NUL character, or over 4096 characters)"
TOO_MANY = f"in files past the first {MAX_PATHS} the profile names (not looked up)"

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
    getattr(os, "O_CLOEXEC", 0)


class SourceText:
    """The source lines of the files under ``roots`` (folders; None: the current folder), read lazily, each
    file once. Raises UsageError for a root that is not a folder."""

    def __init__(self, roots: Sequence[str] | None = None) -> None:
        if roots is None:
            try:
                roots = [os.getcwd()]
            except OSError:  # the current folder was removed: no root, nothing is read
                roots = []
        for r in roots:
            if "\0" in r or not os.path.isdir(r):
                raise UsageError(f"--source-root {r!r}: not a folder")
        # Each root as written (absolute, normalised) and resolved: a candidate is checked against the first
        # before any system call touches it, and once resolved against the second.
        self.roots = tuple(dict.fromkeys(os.path.abspath(r) for r in roots))
        self._real_roots = tuple(dict.fromkeys(os.path.realpath(r) for r in self.roots))
        # recorded path -> (lines, why there are none, why the lines end early: '' when the file was read whole)
        self._files: dict[str, tuple[list[str] | None, str, str]] = {}
        self._by_real: dict[str, tuple[list[str] | None, str, str]] = {}  # resolved path -> the same
        self._read_bytes = 0
        self._looked_up = 0  # distinct paths looked up (MAX_PATHS)
        self._why: dict[str, str] = {}  # call site -> why its text is not shown

    def line(self, callsite: str) -> str | None:
        """The stripped text of ``file:line``, cut to MAX_LINE_CHARS; None when it is not shown (the reason is
        kept for ``note``) or ``callsite`` is no ``file:line``."""
        path, sep, num = callsite.rpartition(":")
        if not sep or not path or not (num.isascii() and num.isdigit()) or len(num) > 18:
            return None
        lines, why, cut = self._file(path)
        n = int(num)
        if lines is not None and 0 < n <= len(lines):
            return bounded(lines[n - 1].strip(), MAX_LINE_CHARS)
        self._why[callsite] = why if lines is None else (cut if cut and n > len(lines) else OUT_OF_RANGE)
        return None

    def note(self, callsites: Iterable[str]) -> str | None:
        """One sentence counting the lines among ``callsites`` whose text ``line`` did not show, by reason; None
        when every one was shown (or none was asked for)."""
        why = Counter(self._why[k] for k in set(callsites) if k in self._why)
        if not why:
            return None
        n = sum(why.values())
        hint = {OUTSIDE: " (--source-root DIR names a folder to read them from)"}
        parts = ", ".join(f"{count} {reason}{hint.get(reason, '')}"
                          for reason, count in sorted(why.items(), key=lambda kv: (-kv[1], kv[0])))
        return (f"Source text not shown for {n} line{'' if n == 1 else 's'}: {parts}; source is read only from "
                f"Python files under the source roots (docs/views.md, lines).")

    def _file(self, path: str) -> tuple[list[str] | None, str, str]:
        hit = self._files.get(path)
        if hit is None:
            if "\0" in path or len(path) > MAX_PATH_CHARS:
                hit = None, _BAD_PATH, ""
            elif not path.endswith(SOURCE_SUFFIX):
                hit = None, NOT_PYTHON, ""
            elif self._looked_up >= MAX_PATHS:
                return None, TOO_MANY, ""
            else:
                self._looked_up += 1
                hit = self._find(path)
            self._files[path] = hit
        return hit

    def _find(self, path: str) -> tuple[list[str] | None, str, str]:
        """(lines, '', why cut) of the first candidate of ``path`` read, else (None, why, '')."""
        why = OUTSIDE
        for candidate in self._candidates(path):
            try:
                os.stat(candidate)  # one system call rules out a missing file; resolving costs one per folder
            except OSError:
                continue
            real = os.path.realpath(candidate)
            if not _under(real, self._real_roots):
                continue
            if not real.endswith(SOURCE_SUFFIX):
                why = NOT_PYTHON
                continue
            got = self._by_real.get(real)
            if got is None:
                got = self._read(real)
                if got is None:
                    continue  # not there: the next candidate
                self._by_real[real] = got
            if got[0] is not None:
                return got
            why = got[1]
        return None, why, ""

    def _candidates(self, path: str) -> Iterator[str]:
        """The paths under a root, as written, that ``path`` may be: itself (absolute) or itself under each root
        (relative), then its trailing parts under each root, longest first."""
        if os.path.isabs(path):
            whole = [os.path.normpath(path)]
        else:
            whole = [os.path.normpath(os.path.join(r, path)) for r in self.roots]
        seen = set()
        for c in whole:
            if c not in seen and _under(c, self.roots):
                seen.add(c)
                yield c
        parts = path.replace("\\", "/").split("/")
        # A tail without '..' lies under the root it is joined to as it stands: no normalising, no check (a
        # profile of many distinct paths costs a few string operations and one stat per tail).
        dotted = ".." in parts
        for i in range(max(1, len(parts) - MAX_SUFFIX_PARTS), len(parts)):
            if not parts[i]:
                continue
            tail = "/".join(parts[i:])
            for r in self.roots:
                c = os.path.join(r, tail)
                if dotted:
                    c = os.path.normpath(c)
                    if not _under(c, self.roots):
                        continue
                if c not in seen:
                    seen.add(c)
                    yield c

    def _read(self, real: str) -> tuple[list[str] | None, str, str] | None:
        """The lines of the file at the resolved path ``real``; None when there is none."""
        try:
            fd = os.open(real, _OPEN_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:  # permission; ELOOP: the last part became a symlink since it was resolved
            return None, UNREADABLE, ""
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # a FIFO, a device, a folder: never read
                return None, NOT_REGULAR, ""
            budget = MAX_TOTAL_BYTES - self._read_bytes
            if budget <= 0:
                return None, OVER_BUDGET, ""
            want = min(st.st_size, MAX_FILE_BYTES, budget)
            chunks, got = [], 0
            while got < want:
                chunk = os.read(fd, min(want - got, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        except OSError:
            return None, UNREADABLE, ""
        finally:
            os.close(fd)
        self._read_bytes += got
        data = b"".join(chunks)
        cut = "" if want >= st.st_size else CUT if want == MAX_FILE_BYTES else OVER_BUDGET
        # Python numbers lines at \n, \r\n and \r only (str.splitlines also breaks at \f, \x1c, \u2028 ...).
        lines = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if cut or lines[-1] == "":
            lines.pop()  # the part after the last newline: a line cut part way, or nothing
        return lines, "", cut


def _under(path: str, roots: Sequence[str]) -> bool:
    """Whether the absolute ``path`` is one of ``roots`` or lies under one (by its parts, not its text:
    ``/a/bc`` is not under ``/a/b``)."""
    return any(os.path.commonpath([path, r]) == r for r in roots)
