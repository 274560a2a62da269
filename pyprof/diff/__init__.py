"""``pyprof diff``: two runs compared per step (docs/diff.md). The stage after report: it reads prof's
aggregates of each run (records, or exports parsed on the way as ``pyprof report`` parses them) and writes prof's
tables, and the HTML page of pyprof.report.page."""

from pyprof.common import one_blas_thread_if_run

one_blas_thread_if_run(__name__)  # before this package imports numpy (python -m pyprof.diff)
