"""Where the tests find the shared files beside the project (``../shared``: the corpus of other people's profiles),
and the one rule for a test that reads them when they are absent: outside CI it is skipped, loudly (the run's
summary counts those tests on a line of its own); in CI (``CI`` set, as .ci/run sets it) it fails, since CI must
run every test of the shared files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS = SHARED / "corpus"
EXTERNAL = CORPUS / "external"
#: The start of the skip reason, which tests/conftest.py counts.
ABSENT = "../shared is absent"


def require_shared() -> Path:
    """The shared folder; skips the calling test when it is absent (fails it under CI)."""
    if CORPUS.is_dir():
        return SHARED
    message = f"{ABSENT} (looked for {CORPUS})"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: CI runs every test of the shared files", pytrace=False)
    pytest.skip(message)
