"""Which reader a file needs, decided from its content (never its name), and opening it."""
from __future__ import annotations

import gzip
import lzma
import os
import secrets
import sys
import tempfile
import zlib

from pyprof import cleanup
from pyprof.common import InputError, expansion_cap, too_expanded
from pyprof.record import HEADER_PREFIX
from pyprof.parse.readers.sqlrows import SQLITE_ERRORS, check_at_rest, connect, describe, lossy_text

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
#: The longest full name (bytes, symbolic links resolved) SQLite 3.40's unix VFS opens: 512 bytes for the name and
#: its "-journal" (measured: 504 opens, 505 is "unable to open database file", with or without immutable=1).
SQLITE_LONGEST_PATH_BYTES = 504
NSYS_REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # how an nsys 2025.1 .nsys-rep (NVIDIA/Fuser) starts


def sniff(head: bytes) -> str:
    """Return 'sqlite', 'json' or 'gzip' for the first bytes of a file; raise ValueError otherwise."""
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(HEADER_PREFIX):
        raise ValueError("already parsed: pyprof parse's records (JSON Lines); `pyprof prof FILE` and `pyprof "
                         "report FILE` read them")
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{'"):
        raise ValueError("already parsed: the original PyProf's output (Python dict lines); `pyprof prof FILE` and "
                         "`pyprof report FILE` read them")
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):  # an array: PyTorch 1.8 previews' events
        return "json"
    if head.startswith(NSYS_REPORT_MAGIC):
        raise ValueError("an Nsight Systems report (.nsys-rep): export it first with "
                         "`nsys export --type sqlite -o FILE.sqlite FILE.nsys-rep`")
    raise ValueError("not a profile: neither an SQLite database nor a (gzipped) JSON trace")


def check_sqlite_size(path: str, display: str) -> None:
    """Raise InputError when the file is shorter than its SQLite header says (a truncated copy).

    The header's page count is trusted only when its version-valid-for field matches the change counter,
    as SQLite itself does. This catches truncation up front on files of any size, before any output."""
    with open(path, "rb") as f:
        header = f.read(100)
        f.seek(0, os.SEEK_END)
        size = f.tell()
    if len(header) < 100:
        raise InputError(display, "truncated SQLite database (shorter than its 100-byte header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[92:96] == header[24:28] and pages and size < pages * page_size:
        raise InputError(display, f"truncated SQLite database: {size} bytes, its header says "
                                  f"{pages * page_size}")


def sqlite_flavour(path: str, display: str) -> str:
    """Return 'nsys' or 'nvprof' for an SQLite file; raise InputError for another tool's database."""
    check_sqlite_size(path, display)
    try:
        db = connect(path, display, lossy_text)  # a table name that is not UTF-8 is no table of ours, not an error
        try:
            tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except SQLITE_ERRORS as e:
        raise InputError(display, f"corrupted or truncated SQLite database ({describe(e)})") from None
    if "StringIds" in tables:
        return "nsys"
    if "StringTable" in tables and "Version" in tables:
        return "nvprof"
    if not tables:
        raise InputError(display, "empty SQLite database: not a profiler export")
    raise InputError(display, "SQLite database of another tool: neither an Nsight Systems export (no StringIds "
                              "table) nor an nvprof export (no StringTable/Version tables)")


#: stdin is copied to TMPDIR whole before it is read (SQLite reads files only, a trace is read twice): at most this
#: many bytes. An export larger than that is read in place by its path, with no copy.
MAX_STDIN_BYTES = 4 << 30


def spool_stdin(display: str = "<stdin>") -> str:
    """Copy stdin to a temporary file (SQLite cannot read a pipe) and return its path; the caller removes it
    (pyprof.cleanup.remove; it is registered there). What does not start as an SQLite database, a JSON trace or
    records, or an xz or gzip stream is refused before anything is copied, and a stream past MAX_STDIN_BYTES when
    it gets there. Raises InputError, also for a TMPDIR that cannot take the copy (the file is removed)."""
    stream = sys.stdin.buffer
    try:
        head = stream.read(64)
    except OSError as e:
        raise InputError(display, f"cannot read: {e.strerror}") from None
    if head and not head.startswith(XZ_MAGIC):  # (nothing: each reader says what an empty input lacks)
        try:
            sniff(head)
        except ValueError as e:
            raise InputError(display, str(e)) from None

    def blocks():
        yield head
        while True:
            try:
                block = stream.read(1 << 20)
            except OSError as e:
                raise InputError(display, f"cannot read: {e.strerror}") from None
            if not block:
                return
            yield block

    def too_large() -> InputError:
        size = f"{MAX_STDIN_BYTES / (1 << 30):g} GiB" if MAX_STDIN_BYTES >= 1 << 30 else \
            f"{MAX_STDIN_BYTES / (1 << 20):g} MiB"
        return InputError(display, f"more than {size} on stdin, the most pyprof copies to TMPDIR: give the file by "
                                   "its path")

    return _copy_to_temp(blocks(), "pyprof-stdin-", "", MAX_STDIN_BYTES, too_large, display, "copy", "spool")


def _copy_to_temp(blocks, prefix: str, suffix: str, cap: int, too_much, display: str, verb: str,
                  pause: str) -> str:
    """Write ``blocks`` (an iterator of bytes) to a new temporary file (pyprof.cleanup) and return its path; past
    ``cap`` bytes raise ``too_much()``. What ``blocks`` raises passes through; a TMPDIR that cannot take the file
    (missing, read-only, full) is an InputError naming ``display``: "cannot VERB it into TMPDIR". However this
    ends but returning, the file is removed."""
    def cannot(e: OSError) -> InputError:  # the temporary folder, not the input, is at fault
        return InputError(display, f"cannot {verb} it into {tempfile.gettempdir()}: {e.strerror or e}")

    try:
        fd, path = cleanup.temp_file(prefix, suffix)
    except OSError as e:
        raise cannot(e) from None
    try:
        with os.fdopen(fd, "wb") as out:
            written = 0
            for block in blocks:
                written += len(block)
                if written > cap:
                    raise too_much()
                try:
                    out.write(block)
                except OSError as e:
                    raise cannot(e) from None
                cleanup.pause_point(pause)
            try:
                out.flush()
            except OSError as e:
                raise cannot(e) from None
    except OSError as e:  # closing: what flush could not write
        cleanup.remove(path)
        raise cannot(e) from None
    except BaseException:  # InputError, and an interruption (SIGINT, SIGTERM, SIGHUP)
        cleanup.remove(path)
        raise
    return path


#: What a compressed records file's message adds: prof, report and load read records as they are.
DECOMPRESS_FIRST = "compressed: decompress it first (xz -dk FILE, gunzip -k FILE)"


def compressed_records(path: str) -> bool:
    """Whether ``path`` is records (parse's, or the original PyProf's dict lines) compressed with xz or gzip,
    which the record readers do not open: decided from the first bytes of what it unpacks to."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(XZ_MAGIC))
        opener = lzma.open if magic.startswith(XZ_MAGIC) else gzip.open if magic.startswith(GZIP_MAGIC) else None
        if opener is None:
            return False
        with opener(path, "rb") as f:
            head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    except (OSError, EOFError, lzma.LZMAError, zlib.error):
        return False
    return head.startswith((HEADER_PREFIX, b"{'", b'{"kind"'))


def _compressed_sqlite(path: str, head: bytes):
    """An opener for an xz- or gzip-compressed SQLite export, or None (gzip is also Kineto's format)."""
    if head.startswith(XZ_MAGIC):
        return lzma.open
    if head.startswith(GZIP_MAGIC):
        with gzip.open(path, "rb") as f:
            try:
                inner = f.read(len(SQLITE_MAGIC))
            except (OSError, EOFError, zlib.error):
                return None  # left for the JSON reader, which names the problem
        return gzip.open if inner == SQLITE_MAGIC else None
    return None


def decompress(path: str, opener, display: str) -> str:
    """Decompress ``path`` to a temporary file (SQLite reads files only); return its path. Raises InputError, and
    leaves no file however it ends."""
    def blocks():
        try:
            with opener(path, "rb") as src:
                while block := src.read(1 << 20):
                    yield block
        except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:
            raise InputError(display, f"corrupted or truncated compressed export ({str(e).splitlines()[0][:200]})") \
                from None

    return _copy_to_temp(blocks(), "pyprof-export-", ".sqlite", expansion_cap(path), lambda: too_expanded(display),
                         display, "decompress", "decompress")


def within_sqlite_limit(path: str, display: str) -> tuple[str, bool]:
    """(a name of ``path`` that SQLite can open, whether it is a temporary one to delete): ``path`` itself, or,
    when its full name is longer than SQLite opens, a hard link to it in the temporary folder (the same file,
    nothing copied), else a copy there (another file system). Raises InputError where neither can be made."""
    full_bytes = len(os.fsencode(os.path.realpath(path)))
    if full_bytes <= SQLITE_LONGEST_PATH_BYTES:
        return path, False
    name = f"pyprof-link-{secrets.token_hex(8)}.sqlite"
    if len(os.fsencode(os.path.realpath(os.path.join(tempfile.gettempdir(), name)))) > SQLITE_LONGEST_PATH_BYTES:
        raise InputError(display, f"path too long for SQLite ({full_bytes} bytes, it opens at most "
                                  f"{SQLITE_LONGEST_PATH_BYTES}), and so is the temporary folder's")
    try:
        return cleanup.link_temp(path, name), True
    except OSError:  # another file system, or links not allowed (fs.protected_hardlinks): copy it
        return decompress(path, open, display), True


def open_source(path: str):
    """Open ``path`` ('-' = stdin) with the reader its content needs, checked up front.

    Returns a Source (activities.Source) with ``check()`` already passed. Raises InputError.
    """
    display = "<stdin>" if path == "-" else path
    temp = None
    if path == "-":
        temp = path = spool_stdin()
    try:
        try:
            with open(path, "rb") as f:
                head = f.read(64)
        except OSError as e:
            raise InputError(display, f"cannot open: {e.strerror}") from None
        if os.path.isdir(path):
            raise InputError(display, "is a directory")
        opener = _compressed_sqlite(path, head)
        if opener is not None:
            # Exports travel compressed (an nsys SQLite file shrinks about tenfold with xz).
            unpacked = decompress(path, opener, display)
            if temp:
                cleanup.remove(temp)
            temp = path = unpacked
            with open(path, "rb") as f:
                head = f.read(64)
        try:
            kind = sniff(head)
        except ValueError as e:
            said = str(e)
            if opener is not None and said.startswith("already parsed"):
                said = said.split(";")[0] + ", " + DECOMPRESS_FIRST + ": `pyprof prof` and `pyprof report` read it then"
            raise InputError(display, said) from None
        if kind == "sqlite":
            check_at_rest(path, display)  # beside the user's file: a link to it in TMPDIR has no journal beside it
            path, linked = within_sqlite_limit(path, display)
            if linked:
                if temp:
                    cleanup.remove(temp)
                temp = path
            flavour = sqlite_flavour(path, display)
            if flavour == "nsys":
                from pyprof.parse.readers.nsys import NsysSource

                src = NsysSource(path, display)
            else:
                from pyprof.parse.readers.nvprof import NvprofSource

                src = NvprofSource(path, display)
        else:
            from pyprof.parse.readers.kineto import KinetoSource

            src = KinetoSource(path, display, gzipped=(kind == "gzip"))
        src.check()
        src.temp_path = temp
        return src
    except BaseException:
        if temp:
            cleanup.remove(temp)
        raise
