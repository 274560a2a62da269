"""Seeded mutation fuzzing of the three commands (issue 13): real seed files, one mutation each, run as a user.

The package only builds inputs and judges what the commands do with them, from outside: it runs
``python -m pyprof.parse|prof|report`` as subprocesses and reads their exit code, stdout, stderr, output files
and the folders they ran in. It imports nothing of pyprof, so it measures whatever the code becomes.

- ``seeds``: the real seed files (small corpus exports, nvprof files, Kineto traces, committed captures) and
  records made from them by ``pyprof.parse``.
- ``registry``: the mutation classes (one per class of issue 13) and what a mutated input is run with.
- ``sqlite_mut``, ``sqlite_markers``, ``trace_mut``, ``records_mut``, ``bytes_mut``, ``paths_mut``: the mutators.
- ``cases``: one case, from its seeded generator to its judged runs.
- ``judge``: runs one command with a timeout and a memory measure and classifies the outcome; ``validate``
  says whether a successful command's output is valid.

``bench/fuzz_run.py`` is the runner; ``tests/robustness`` reuses the mutators in-process.
"""
from __future__ import annotations
