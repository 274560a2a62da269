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


def test_a_symbol_left_mangled_gives_its_function_name():
    # Names a C++ runtime too old for their mangling leaves as they are (GCC 12's cannot read DF16b,
    # std::bfloat16_t): the function is the last name of the leading nested name, by the Itanium ABI's
    # <length><identifier> pairs. c++filt (binutils 2.40) gives "void ck_tile::kentry<1, ...>(...)" for the first.
    assert short_name("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdIDF16bEEEEvDpT1_") == "kentry"
    assert short_name("_Z3fooi") == "foo"  # foo(int): not nested
    assert short_name("_ZNK3Foo3barEv") == "bar"  # Foo::bar() const
    assert short_name("_ZNSt6thread6_StateD2Ev") == "_State"  # std::thread::_State::~_State(): the class's name
    # not an Itanium name past its prefix: kept whole
    assert short_name("_Z") == "_Z" and short_name("_ZN99abc") == "_ZN99abc"


def test_a_profiler_trace_s_mangled_kernel_names_are_demangled():
    # Kineto writes some kernel names mangled. vLLM's decode on an MI300 (ck_tile's RMSNorm, c++filt:
    # "void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<...") and a DeepSeek training step on an H800 (PyTorch's
    # normal distribution kernel: c++filt's demangling is checked to its first template arguments).
    import io

    from shared_files import CORPUS, require_shared

    from pyprof.parse import parse_file
    from pyprof.record import read_lines

    require_shared()
    for path, short, longs in [
        # demangled where the C++ runtime knows DF16b (GCC 13 and later), else left as it is
        ("external/tracelens_vllm_decode_full_graph_execution.json.gz", "kentry",
         ("void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<", "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdI")),
        ("external-2026-12/deepseek_profile-data_train_h800.json", "distribution_elementwise_grid_stride_kernel",
         ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
          "at::native::templates::cuda::normal_and_transform<float, float, 4ul, at::CUDAGeneratorImpl*, ",)),
    ]:
        out = io.StringIO()
        parse_file(str(CORPUS / path), out)
        names = [d["kLongName"] for d in read_lines(out.getvalue().splitlines()) if d.get("kShortName") == short]
        assert names and all(n.startswith(longs) for n in names), path
