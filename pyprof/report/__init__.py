"""The report stage: prof's views over parse's records rendered as one self-contained HTML page
(``pyprof report``, pyprof.report.page), and the records as a Chrome/Perfetto trace (pyprof.report.perfetto).

The views and the Table they produce are prof's (pyprof.prof.views, pyprof.prof.tables); this package only
renders them.
"""

from pyprof.common import one_blas_thread_if_run

one_blas_thread_if_run(__name__)  # before this package imports numpy (python -m pyprof.report)
