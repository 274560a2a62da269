"""Issue 45: the distribution's metadata is in pyproject.toml, the version in one place (pyprof.__version__), the
CHANGELOG names it, and what the package ships at run time (the report's assets, the agent's guide, the schemas)
is declared as package data. Building and installing a wheel without a compiler is docs/release.md's check."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import pyprof

ROOT = Path(__file__).resolve().parents[1]

tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")


def test_the_project_is_torch_pyprof_with_one_version_and_one_command():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = meta["project"]
    assert project["name"] == "torch-pyprof"
    assert project["dynamic"] == ["version"] and "version" not in project
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pyprof.__version__"}
    assert project["scripts"] == {"pyprof": "pyprof.cli:run"}
    # the setup script builds the native code and says nothing else of the project
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert "setup(ext_modules=[CORE, SCAN])" in setup and "version" not in setup.split("setup(")[-1]
    assert re.search(rf"^## {re.escape(pyprof.__version__)} ", (ROOT / "CHANGELOG.md").read_text(), re.M)
    # torch only for capture; the agent's SDK only for pyprof mcp
    assert not any(d.startswith("torch") for d in project["dependencies"])
    assert project["optional-dependencies"]["agent"] == ["mcp>=2.3,<3"]


def test_the_files_read_at_run_time_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            assert list(folder.glob(pattern)), (package, pattern)
    assert set(data) == {"pyprof.report", "pyprof.agent", "pyprof.schemas"}
