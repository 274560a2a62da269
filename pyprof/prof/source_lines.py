"""The text of a user's source line, for the lines view. Paths in records are absolute paths on the capture
machine; when one is not readable here, the same file is looked for under the current directory by its path
suffix (``/home/u/proj/examples/transformer.py`` -> ``examples/transformer.py``). Files are read lazily, once."""
from __future__ import annotations

import os

_files: dict = {}


def _lines_of(path: str, root: str) -> list[str] | None:
    key = (path, root)
    if key in _files:
        return _files[key]
    text = None
    candidates = [path]
    parts = path.replace("\\", "/").split("/")
    # Longest suffix first: the most specific match wins.
    candidates += [os.path.join(root, *parts[i:]) for i in range(1, len(parts)) if parts[i]]
    for c in candidates:
        try:
            with open(c, encoding="utf-8", errors="replace") as f:
                text = f.read().splitlines()
            break
        except OSError:
            continue
    _files[key] = text
    return text


def source_line(callsite: str, root: str | None = None) -> str | None:
    """The stripped text of ``file:line`` (None when the file is not found or the line is out of range)."""
    path, sep, num = callsite.rpartition(":")
    if not sep or not num.isdigit() or not path:
        return None
    lines = _lines_of(path, root or os.getcwd())
    n = int(num)
    if not lines or not 0 < n <= len(lines):
        return None
    return lines[n - 1].strip()
