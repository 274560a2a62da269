"""The registry refuses duplicates with a message naming both functions."""
from __future__ import annotations

import pytest

from pyprof.common import UsageError
from pyprof.prof.model import registry


def test_duplicate_names_are_refused_naming_both():
    with pytest.raises(UsageError) as e:
        @registry.register("torch.mm")
        def my_mm(a):  # pragma: no cover - never registered
            pass
    msg = str(e.value)
    assert "pyprof.prof.model.formulas.gemm.mm" in msg and "my_mm" in msg


def test_a_refused_registration_registers_none_of_its_names():
    with pytest.raises(UsageError):
        registry.register("test.only.fresh_name", "torch.mm")(lambda a: None)
    assert registry.get("test.only.fresh_name") is None


def test_register_needs_a_name():
    with pytest.raises(UsageError):
        registry.register()
