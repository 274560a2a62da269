"""``python -m pyprof.report``: the same as ``pyprof report``."""
from pyprof.common import run_main
from pyprof.report.cli import PROG, main

run_main(PROG, main)
