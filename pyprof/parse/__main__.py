"""``python -m pyprof.parse``: see pyprof.parse.cli."""
import sys

from pyprof.parse.cli import main

sys.exit(main())
