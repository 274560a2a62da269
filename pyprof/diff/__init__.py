"""``pyprof diff``: two runs compared per step (docs/diff.md). The stage after report: it reads prof's
aggregates of each run (records, or exports parsed on the way as ``pyprof report`` parses them) and writes prof's
tables, and the HTML page of pyprof.report.page."""
