"""``python -m pyprof.diff``: the same as ``pyprof diff``."""
import sys

from pyprof.diff.cli import main

sys.exit(main())
