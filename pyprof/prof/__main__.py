"""``python -m pyprof.prof``."""
from pyprof.common import run_main
from pyprof.prof.cli import PROG, main

run_main(PROG, main)
