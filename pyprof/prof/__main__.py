"""``python -m pyprof.prof``."""
import sys

from pyprof.prof.cli import main

sys.exit(main())
