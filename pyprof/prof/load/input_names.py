"""The names inputs are shown by: a worker of several inputs is named after its input (aggregate.worker_name), in
every view, the report and the diff. The base name alone would give two rank files of one base name
(``dirA/recs.dict``, ``dirB/recs.dict``) one label, so each input is named by the shortest tail of its path
that no other input's path ends with."""
from __future__ import annotations

import os
from collections import Counter

STDIN = "<stdin>"


def input_names(paths: list[str]) -> list[str]:
    """One name per path, in order: its base name where no other input shares it, else the fewest trailing
    folders that set it apart (``dirA/recs.dict``); ``<stdin>`` for ``-``. The same file given twice (one
    absolute path) cannot be told apart by its path: each copy after the first gets `` (2)``, `` (3)``, ..."""
    parts = [None if p == "-" else tuple(os.path.normpath(os.path.abspath(p)).split(os.sep)) for p in paths]
    tail: dict[tuple, int] = {}  # a path -> how many trailing parts name it apart from every other path
    left = {t for t in parts if t is not None}
    k = 1
    while left:
        counts = Counter(t[-k:] for t in left | set(tail))
        for t in [t for t in left if counts[t[-k:]] == 1 or k == len(t)]:
            tail[t] = k
            left.discard(t)
        k += 1
    names = []
    for i, t in enumerate(parts):
        if t is None:
            names.append(STDIN)
            continue
        name = os.sep.join(t) if tail[t] == len(t) else "/".join(t[-tail[t]:])
        copy = parts[:i].count(t)
        names.append(f"{name} ({copy + 1})" if copy else name)
    return names
