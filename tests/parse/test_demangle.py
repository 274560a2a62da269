"""Short names from demangled kernel names (pyprof/parse/readers/demangle.py)."""
from __future__ import annotations

from pyprof.parse.readers.demangle import SHORT_NAME_SCAN_CHARS, short_name


def test_short_name_is_the_function_name():
    # The B200 trace's vLLM kernel: template arguments with parentheses and comparisons before the name.
    name = ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
            "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, float, int, int)")
    assert short_name(name) == "fused_add_rms_norm_kernel"
    assert short_name("void at::native::foo<float, 4>(float*, int)") == "foo"


def test_a_name_past_the_scan_limit_is_shortened_from_its_beginning():
    # A name of megabytes (a corrupt or hostile trace) is scanned only as far as SHORT_NAME_SCAN_CHARS: the
    # function's name comes first. A short name is never longer than that.
    long_real = "void k<" + "x" * (SHORT_NAME_SCAN_CHARS - 20) + ">(int)"
    assert short_name(long_real) == "k"
    assert short_name("void ns::k<" + "x" * (20 << 20) + ">(int)") == "k"
    no_shape = "y" * (20 << 20)
    assert short_name(no_shape) == "y" * SHORT_NAME_SCAN_CHARS
