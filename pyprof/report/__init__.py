"""The report stage: prof's views over parse's records rendered as one self-contained HTML page
(``pyprof report``, pyprof.report.page), and the records as a Chrome/Perfetto trace (pyprof.report.perfetto).

The views and the Table they produce are prof's (pyprof.prof.views, pyprof.prof.tables); this package only
renders them.
"""
