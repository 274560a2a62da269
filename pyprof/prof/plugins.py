"""Loading user formulas: ``--plugin my_ops.py`` or ``--plugin package.module``. The plugin registers its
ops with ``pyprof.prof.register`` exactly as the built-in formulas do (duplicates are refused)."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from pyprof.common import PyprofError, UsageError


def load_plugin(spec: str) -> None:
    """Import a plugin from a file path (ends in .py or exists) or a module name. Raises UsageError."""
    try:
        if spec.endswith(".py") or os.path.sep in spec or os.path.exists(spec):
            if not os.path.isfile(spec):
                raise UsageError(f"--plugin {spec}: no such file")
            name = "pyprof_plugin_" + os.path.splitext(os.path.basename(spec))[0].replace("-", "_")
            loc = importlib.util.spec_from_file_location(name, spec)
            if loc is None or loc.loader is None:
                raise UsageError(f"--plugin {spec}: cannot load")
            mod = importlib.util.module_from_spec(loc)
            sys.modules[name] = mod
            loc.loader.exec_module(mod)
        else:
            importlib.import_module(spec)
    except PyprofError:
        raise
    except ImportError as e:
        raise UsageError(f"--plugin {spec}: {e}") from None
