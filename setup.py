from setuptools import Extension, find_packages, setup

# parse's compiled core (docs/parse.md): built where a C compiler and SQLite's headers are present; optional, so an
# install without them succeeds and parse runs its pure-Python path, which gives the same output several times
# slower (parse's summary line then says so, and what to install).
CORE = Extension("pyprof.parse._core", ["pyprof/parse/_core.c", "pyprof/parse/_feed.c",
                                        "pyprof/parse/_attribute.c", "pyprof/parse/_attribute_emit.c",
                                        "pyprof/parse/_attribute_json.c", "pyprof/parse/_sweep.c",
                                        "pyprof/parse/_ahead.c", "pyprof/parse/_launches.c"],
                 depends=["pyprof/parse/_core.h", "pyprof/parse/_attribute.h", "pyprof/parse/_ahead.h"],
                 libraries=["sqlite3"], optional=True,
                 extra_compile_args=["-O2", "-pthread"], extra_link_args=["-pthread"])
# the nsys reader's one pass per table before and beside its records (pyprof/parse/readers/nsys_scan.py); optional likewise.
SCAN = Extension("pyprof.parse._scan", ["pyprof/parse/_scan.c", "pyprof/parse/_ahead.c"],
                 depends=["pyprof/parse/_ahead.h"], libraries=["sqlite3"], optional=True,
                 extra_compile_args=["-O2", "-pthread"], extra_link_args=["-pthread"])

# Everything else (name, version, dependencies, the command) is in pyproject.toml: this file builds the native code.
setup(ext_modules=[CORE, SCAN])
