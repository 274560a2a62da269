"""``python -m pyprof.report``: the same as ``pyprof report``."""
import sys

from pyprof.report.cli import main

sys.exit(main())
