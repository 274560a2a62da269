"""``python -m pyprof.diff``: the same as ``pyprof diff``."""
from pyprof.common import run_main
from pyprof.diff.cli import PROG, main

run_main(PROG, main)
