import pathlib

import pytest


def pytest_collection_modifyitems(config, items):
    gpu_dir = pathlib.Path(__file__).parent / "gpu"
    for item in items:
        if gpu_dir in pathlib.Path(item.fspath).parents:
            item.add_marker(pytest.mark.gpu)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (run on the GPU machine; CI deselects)")
