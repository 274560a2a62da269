import pathlib

import pytest

from shared_files import ABSENT, require_shared


def pytest_collection_modifyitems(config, items):
    gpu_dir = pathlib.Path(__file__).parent / "gpu"
    for item in items:
        if gpu_dir in pathlib.Path(item.fspath).parents:
            item.add_marker(pytest.mark.gpu)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (run on the GPU machine; CI deselects)")


@pytest.fixture(scope="session")
def shared() -> pathlib.Path:
    """The ``../shared`` folder (tests/shared_files.py: skipped loudly without it, required in CI)."""
    return require_shared()


def pytest_terminal_summary(terminalreporter):
    """A line of its own when tests of the shared files were skipped, so that a green run without them does
    not pass for a full one."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r.longrepr, tuple) and ABSENT in str(r.longrepr[2])]
    if skipped:
        terminalreporter.write_line(f"WARNING: {len(skipped)} tests of the shared files were skipped: {ABSENT}; "
                                    "CI runs them (CI=1 makes them required)", yellow=True, bold=True)
