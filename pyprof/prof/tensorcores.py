"""Did a kernel use Tensor Cores (AMD: matrix cores)? Rules on kernel names, Volta to Blackwell and CDNA 2 to 4
(docs/tensor_cores.md).

``tc_used(name)`` answers True (the name says tensor-core instructions or a tensor-core-only kernel family),
False (a matrix kernel that says it runs on CUDA cores: sgemm, ffma, simt, gemv ...) or None (not a matrix
kernel: element-wise, reductions, copies). The ``tc`` column is then 1, 0 (a GEMM/convolution/attention
kernel in a dtype that Tensor Cores support, which did not use them), or ``-`` (not applicable).
"""
from __future__ import annotations

import re
from functools import lru_cache

# Kernels that belong to matrix libraries but multiply nothing (layout changes, workspace set-up, split-K
# reductions, scaling, attention backward's dO*O and dQ conversion): checked first here (not applicable, whatever their
# template arguments mention), and always helpers of their op call (kernels.is_helper): see library_helper.
LIBRARY_HELPER = re.compile(
    r"init_device_workspace|AddPaddingKernel|RemovePaddingKernel|nchwToNhwc|nhwcToNchw|"
    r"splitKreduce|split_k_reduce|reduction::kernel::ReduceSplitK|dot_do_o|convert_dq|scal_kernel|"
    r"scalePackedTensor|epilogue::impl|xmma\w*_execute_split_k_kernel|"
    # at::cuda::philox::unpack_cudnn: a one-thread kernel that reads the RNG seed and offset for cuDNN's
    # attention (PyTorch's ATen/cuda/PhiloxUtils); it multiplies nothing.
    r"unpack_cudnn", re.IGNORECASE)
# Tensile/hipBLASLt (case matters: generated names). A GEMM kernel is named C's, A's and B's index letters first
# (``Cijk_Ailk_Bljk_...``); it used the matrix cores when its name gives the matrix instruction it was built
# on, ``_MI<M>x<N>x<K>[x<B>]_`` (Tensile's Solution.getNameMin), else it ran on the vector ALUs. The beta-only
# pass (``Cijk_S``), the ``_PostGSU`` reduction and stream-K's ``WSFlags`` multiply nothing.
TENSILE_GEMM = re.compile(r"(?:^|[^A-Za-z])C[a-z]+_A[a-z]+_B[a-z]+_")
_TENSILE_MI = re.compile(r"_MI\d+x\d+x\d+")
TENSILE_HELPER = re.compile(r"^C[a-z]+_[A-Z0-9][A-Za-z0-9]*(?:_GB)?(?:_GA)?$|_PostGSU|^WSFlags")


def library_helper(name: str) -> bool:
    """True for a kernel of a matrix library (cuBLAS, cuDNN, CUTLASS, Tensile/hipBLASLt) that multiplies nothing:
    a helper of its GEMM/convolution/attention call, to which Tensor Cores do not apply."""
    return bool(LIBRARY_HELPER.search(name) or TENSILE_HELPER.search(name))


# Then names that say CUDA cores even though they are matrix kernels.
_SIMT = re.compile(
    r"ffma|simt|(?<![0-9a-z])[sdcz]gemm|_sgemm|_dgemm|[^a-z]gemv|gemvx|gemv2|gemmSN|gemmk1|dot_kernel|"
    r"implicit_convolve_sgemm|precomputed_convolve_sgemm|explicit_convolve_sgemm|dgrad_engine|"
    r"wgrad_alg[0-9]_engine|fft2d|fft_|winograd(?!.*(?:hmma|tensor))|fmha_cutlass[FB]_f32|"
    # Composable Kernel's DL kernels (dot instructions on the vector ALUs, for GPUs without matrix cores)
    r"gemm_dl\b|_dl_v\d|gridwise_gemm_dl",
    re.IGNORECASE)
# A tensor-core instruction shape or kernel family in the name.
_TC = re.compile(
    r"(?<![0-9x])(?:884|1688|16816|16832|8816|8832|161616)(?![0-9x])|hmma|imma|dmma|wmma|gmma|tensorop|"
    r"tensor\d+x\d+x\d+|nvjet|flash_fwd|flash_bwd|FlashAttn|fmha_cutlass|fmha_|cudnn_generated_fort_native_sdpa|"
    r"sm\d+a?_xmma_\w*?(?:f16|bf16|tf32|e4m3|e5m2|i8|s8|fp8)|cutlass3x_sm\d+|"
    r"xmma_\w*?(?:hgemm|f16f16|bf16bf16|tf32)|_hgemm|bf16gemm|_h[0-9]+gemm|tcgen05|umma|"
    r"sm100_|sm120_|fmhaSm1\d\d|(?:bmm|gemm)_\w*_sm1\d\d[a-z]?$|"
    # AMD: Composable Kernel's matrix-core paths are named xdl/xdlops (MFMA, CDNA) or wmma (RDNA); MIOpen's
    # implicit-GEMM convolutions on them gtcx; hand-written kernels may say mfma.
    r"xdl|mfma|gtcx",
    re.IGNORECASE)
# Names of matrix-multiply kernels (used when the op is unknown): these get 0 rather than '-'.
MATRIX_KERNEL = re.compile(
    r"gemm|gemv|xmma|nvjet|cutlass|implicit|fprop|dgrad|wgrad|conv|flash|fmha|sdpa|attention|attn|winograd|"
    r"dot_kernel|wmma|hmma|Kernel2|xdl|mfma|gtcx", re.IGNORECASE)

#: dtypes that some generation of Tensor Cores takes (fp32 through TF32). fp64 only on A100/H100/B200, whose
#: DMMA kernels are recognised by name; a fp64 kernel that did not use them shows '-'.
TC_DTYPES = frozenset({"float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", None})

#: Names are classified by their first NAME_SCAN_CHARS characters. Real kernel names are a few kB (the longest
#: CUTLASS template instantiations about 10 kB); the rules' alternations cost about 2 s a MB, so a name of
#: megabytes (a corrupt export's, a fuzzer's) would take prof seconds per distinct name. The caches are keyed by
#: the cut name, so that they never hold a huge one.
NAME_SCAN_CHARS = 1 << 16


def tc_used(name: str) -> bool | None:
    """True if the kernel name says Tensor Cores, False if it says a CUDA-core matrix kernel, else None."""
    return _tc_used(name[:NAME_SCAN_CHARS])


@lru_cache(maxsize=65536)
def _tc_used(name: str) -> bool | None:
    if library_helper(name):
        return None
    if TENSILE_GEMM.search(name):
        return bool(_TENSILE_MI.search(name))
    if _SIMT.search(name):
        return False
    if _TC.search(name):
        return True
    return None


#: How the TC column shows a kernel's Tensor Core state (docs/prof.md): used, eligible but not used, not applicable.
TC_TEXT = {True: "1", False: "0", None: "-"}


def tc_state(name: str, matrix_role: bool, dtype: str | None) -> bool | None:
    """Whether the kernel ran on Tensor Cores: True (it did), False (it could have and did not: a matrix kernel
    of a Tensor Core dtype), None (not applicable). The TC column shows these as TC_TEXT says.

    ``matrix_role`` says the kernel is the matrix kernel of a GEMM/convolution/attention call (or named like
    one); ``dtype`` is the op's input dtype (None when the marker did not record it).
    """
    return _tc_state(name[:NAME_SCAN_CHARS], matrix_role, dtype)


@lru_cache(maxsize=65536)
def _tc_state(name: str, matrix_role: bool, dtype: str | None) -> bool | None:
    used = _tc_used(name)
    if used:
        return True
    if used is None and library_helper(name):
        return None
    if (matrix_role or used is False or MATRIX_KERNEL.search(name)) and dtype in TC_DTYPES:
        return False
    return None


# dtype tokens in kernel names, most specific first: used only when the marker did not record dtypes.
_DTYPE_TOKENS = [
    (re.compile(r"e4m3", re.I), "float8_e4m3fn"), (re.compile(r"e5m2", re.I), "float8_e5m2"),
    # cuBLASLt nvjet kernels name their input type first: h = fp16, t = bf16, s = fp32 (inferred from the H200
    # captures: fp16 ResNet -> nvjet_sm90_hsh_*, bf16 Transformer -> nvjet_sm90_tst_*).
    (re.compile(r"nvjet_(?:sm\d+_)?h"), "float16"), (re.compile(r"nvjet_(?:sm\d+_)?t"), "bfloat16"),
    (re.compile(r"nvjet_(?:sm\d+_)?s"), "float32"),
    (re.compile(r"bf16|bfloat16|BFloat16|__nv_bfloat16", re.I), "bfloat16"),
    (re.compile(r"tf32", re.I), "float32"),
    (re.compile(r"f16f16|fp16|_f16_|c10::Half|__half|\bhalf\b|h884|h1688|h16816|_hgemm", re.I), "float16"),
    (re.compile(r"f64|double|dgemm|fp64", re.I), "float64"),
    (re.compile(r"f32f32|fp32|_f32_|sgemm|<float[,>]|\bfloat\b", re.I), "float32"),
]


def dtype_from_kernel_name(name: str) -> str | None:
    """The data type a kernel name (or its template arguments) states, or None. A guess, used only for
    records whose markers carry shapes without dtypes (PyTorch's emit_nvtx alone)."""
    return _dtype_from_kernel_name(name[:NAME_SCAN_CHARS])


@lru_cache(maxsize=65536)
def _dtype_from_kernel_name(name: str) -> str | None:
    for rx, dtype in _DTYPE_TOKENS:
        if rx.search(name):
            return dtype
    return None
