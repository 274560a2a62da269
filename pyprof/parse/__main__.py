"""``python -m pyprof.parse``: see pyprof.parse.cli."""
from pyprof.common import run_main
from pyprof.parse.cli import PROG, main

run_main(PROG, main)
