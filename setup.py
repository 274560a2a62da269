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

setup(
    name="pyprof",
    version="0.1.0",
    description="Which PyTorch op, layer and source line launched each GPU kernel, with FLOPs, bytes and roofline",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["pyprof", "pyprof.*"]),
    ext_modules=[CORE, SCAN],
    # The HTML report inlines these into every page it writes.
    package_data={"pyprof.report": ["static/*.css", "static/*.js"]},
    # torch is needed only by the capture stage (pyprof.init); parse and prof run without it, so it is an extra.
    install_requires=["nvtx>=0.2.10", "numpy", "tabulate>=0.9", "tqdm>=4.60", "orjson>=3.9",
                      "msgspec>=0.18"],
    # cluster: the ranks view of many rank files on Dask (docs/cluster.md); test has it so CI runs that path.
    extras_require={"capture": ["torch>=2.1"], "notebook": ["pandas>=1.5"],
                    "cluster": ["dask[distributed]>=2024.1", "pyarrow>=14"],
                    "test": ["pytest>=7", "expecttest", "selenium>=4.10", "pandas>=1.5", "dask[distributed]>=2024.1",
                             "pyarrow>=14"]},
    entry_points={"console_scripts": ["pyprof=pyprof.cli:run"]},
)
