"""Did a kernel use Tensor Cores (AMD: matrix cores)? A table of kernel-name families, Volta to Blackwell and
CDNA 2 to 4, each taken from real kernels (docs/tensor_cores.md).

``FAMILIES`` is read top to bottom and the first row whose pattern is found in the name decides: the kernel used
Tensor Cores (TC), ran a matrix product on CUDA cores / vector ALUs (CUDA_CORES), is a matrix library's kernel
that multiplies nothing (HELPER), or is no matrix kernel at all (NOT_MATRIX). A name no row knows, or one that says
"matrix" without saying the engine (MATRIX_UNKNOWN), is left to the op it belongs to. ``tc_used(name)`` answers
True, False or None from that; ``tc_state`` gives the TC column: 1, 0 (a GEMM/convolution/attention kernel in a
dtype that Tensor Cores take, which did not use them), ``-`` (not applicable).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

TC, CUDA_CORES, HELPER, NOT_MATRIX, MATRIX_UNKNOWN = "tc", "cuda cores", "helper", "not a matrix kernel", "matrix?"
#: Tensor Cores for 16- and 8-bit inputs only: a Triton tl.dot on fp32 uses them only when TF32 is allowed
#: (Inductor passes ALLOW_TF32 from torch.backends.cuda.matmul.allow_tf32, off by default), which no name says.
TC_LOW_PRECISION = "tc for 16/8-bit inputs"
LOW_PRECISION = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8"})

# Tensile/hipBLASLt (case matters: generated names). A GEMM kernel is named C's, A's and B's index letters first
# (``Cijk_Ailk_Bljk_...``); it used the matrix cores when its name gives the matrix instruction it was built
# on, ``_MI<M>x<N>x<K>[x<B>]_`` (Tensile's Solution.getNameMin), else it ran on the vector ALUs. The beta-only
# pass (``Cijk_S``), the ``_PostGSU`` reduction and stream-K's ``WSFlags`` multiply nothing. kernels.py uses
# TENSILE_GEMM too (a GEMM with a ``_Bias_`` epilogue is its call's main kernel).
TENSILE_GEMM = re.compile(r"(?:^|[^A-Za-z])C[a-z]+_A[a-z]+_B[a-z]+_")
_TENSILE_HELPER = r"^C[a-z]+_[A-Z0-9][A-Za-z0-9]*(?:_GB)?(?:_GA)?$|_PostGSU|^WSFlags"

# Traces the examples come from: ../shared is the shared corpus beside the repository.
_S = "../shared/corpus/"
_DS = _S + "external-2026-12/deepseek_profile-data_train_h800.json"
_NCU = "tests/data/ncu/families.csv.gz"  # Nsight Compute counters of every family PyTorch launches (H100)
_MI300 = _S + "external/tracelens_mi300_resnet_act_checkpoint.json.gz"


class Family(NamedTuple):
    """One row of the name table: the first row whose ``pattern`` is found in a kernel name gives ``answer``."""
    name: str
    pattern: re.Pattern
    answer: str
    example: str  # a real kernel name (or its distinctive start) of this family ...
    source: str  # ... and the trace that holds it (repository path, or ../shared/corpus/...)


def _row(name: str, pattern: str, answer: str, example: str, source: str, flags: int = 0) -> Family:
    return Family(name, re.compile(pattern, flags), answer, example, source)


_I = re.IGNORECASE
FAMILIES: tuple[Family, ...] = (
    # --- kernels of matrix libraries that multiply nothing: first, whatever their template arguments mention ---
    _row("cuBLAS/cuBLASLt helper", r"splitKreduce|split_k_reduce|epilogue::impl|scal_kernel|reduce_1Block|"
         r"compute_gemm_pointers", HELPER, "void cublasLt::splitKreduce_kernel<", "tests/data/kineto/resnet.pt.trace.json.gz"),
    # Layout changes, workspace and offset set-up, padding, scaling, split-K passes, im2col, Winograd's transforms
    # around the batched GEMM, the RNG seed reader of cuDNN attention (PyTorch's at::cuda::philox::unpack_cudnn).
    _row("cuDNN helper", r"init_device_workspace|AddPaddingKernel|RemovePaddingKernel|nchwToNhwc|nhwcToNchw|"
         r"scalePackedTensor|xmma\w*_execute_split_k_kernel|compute\w*Offsets|im2col|reduce_wgrad|unpack_cudnn|"
         r"winograd\w*(?:Data|Filter|Output|Delta)\dx\d|generateWinogradTiles", HELPER,
         "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<", "tests/data/kineto/resnet.pt.trace.json.gz", _I),
    _row("CUTLASS helper", r"reduction::kernel::ReduceSplitK|prepare_grouped_gemm_data", HELPER,
         "void detail::prepare_grouped_gemm_data<cutlass::bfloat16_t", _NCU),
    # Attention backward's dO*O row sums and dQ/dKV conversion (FlashAttention 2, cuDNN), FA2's split-KV combine
    # and FA3's pre/post-processing: element-wise and reductions (0 tensor-pipe instructions, ncu).
    _row("attention helper", r"dot_do_o|convert_dq|convert_dkv|clear_dkvaccum|flash_fwd_splitkv_combine|"
         r"FlashAttnBwdPreprocess|FlashAttnBwdPostprocess", HELPER,
         "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<", _DS, _I),
    _row("DeepGEMM helper", r"dpsk::grouped_gemm::cuda::utils::", HELPER,
         "void dpsk::grouped_gemm::cuda::utils::transpose<", _DS),
    # MIOpen's element-wise kernels on tensor slices (bias, set, scale around its convolutions).
    _row("MIOpen tensor-op helper", r"^SubTensorOp", HELPER, "SubTensorOpWithScalar1d", _MI300),
    _row("Tensile helper", _TENSILE_HELPER, HELPER, "Cijk_S", "(Tensile's KernelWriterBetaOnly; no trace here)"),
    # --- not matrix kernels, though a pattern below would catch their names ---
    _row("Triton element-wise/reduction", r"^triton_(?:poi|red|per)_", NOT_MATRIX,
         "triton_poi_fused__to_copy__unsafe_view_add_bmm_cat", "tests/data/compiled/compiled_lm.pt.trace.json.gz"),
    _row("TensorRT pooling", r"xmma_pooling", NOT_MATRIX, "sm50_xmma_pooling_coalescedC_NHWC",
         _S + "external/nsys2023.1_memfusion_tensorrt.sqlite"),
    _row("triton_kernels finalize/scatter", r"^_finalize_matmul", NOT_MATRIX, "_finalize_matmul_scatter_bf16",
         _S + "external/tracelens_vllm_decode_full_graph_execution.json.gz"),
    # --- AMD ---
    _row("Tensile/hipBLASLt GEMM on MFMA", TENSILE_GEMM.pattern + r".*_MI\d+x\d+x\d+", TC,
         "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_",
         _S + "external/tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz"),
    _row("Tensile GEMM on vector ALUs", TENSILE_GEMM.pattern, CUDA_CORES, "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_",
         "(Tensile's naming without MatrixInstruction; no trace here)"),
    # Composable Kernel's DL kernels use dot instructions on the vector ALUs (GPUs without matrix cores).
    _row("Composable Kernel DL", r"gemm_dl\b|_dl_v\d|gridwise_gemm_dl", CUDA_CORES, "ck::kernel_gemm_dl_v1r3",
         "(Composable Kernel's sources; no trace here)", _I),
    # CK's matrix-core paths are xdl/xdlops (MFMA, CDNA) or wmma (RDNA); MIOpen's implicit GEMMs on them gtcx.
    _row("Composable Kernel xdl / MIOpen gtcx", r"(?<![a-z])xdl|xdlops|_gtcx|mfma", TC,
         "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weight", _MI300, _I),
    # Triton matmuls of vLLM's triton_kernels (tl.dot on bf16 tiles of 16 and more: MFMA/MMA).
    _row("triton_kernels matmul_ogs", r"^_matmul_ogs_", TC, "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1",
         _S + "external/tracelens_vllm_decode_full_graph_execution.json.gz"),
    # --- NVIDIA: matrix kernels on CUDA cores, before the families whose other kernels use Tensor Cores ---
    # (ffma/simt name the instruction; [sdcz]gemm, gemv, dot, gemmSN/gemmk1 are cuBLAS's CUDA-core kernels; cuDNN's
    # scudnn, implicit/precomputed/explicit convolve_sgemm, dgrad_engine, wgrad_alg and FFT/Winograd paths.)
    _row("CUDA-core GEMM/convolution", r"ffma|simt|(?<![0-9a-z])[sdcz]gemm|_sgemm|_dgemm|gcgemm|[^a-z]gemv|gemvx|"
         r"gemv2|gemmSN|gemmk1|dot_kernel|convolve_sgemm|dgrad_engine|wgrad_alg[0-9]_engine|fft2d|fft_|scudnn|"
         r"flip_filter|pointwise_mult_and_sum_complex|winograd(?!.*(?:hmma|tensor))", CUDA_CORES,
         "sm80_xmma_gemm_f32f32_f32f32_f32_", "tests/data/kineto/lenet.pt.trace.json.gz", _I),
    # xformers/PyTorch memory-efficient attention: fp32 kernels built for sm50/sm70/sm75 use FMAs; those built for
    # sm80 use TF32 Tensor Cores (ncu: fmha_cutlassF_f32_..._sm80 ran HMMA on the H100).
    _row("memory-efficient attention fp32 pre-Ampere", r"fmha_cutlass[FB]_f32\w*_sm(?:50|70|75)", CUDA_CORES,
         "fmha_cutlassF_f32_aligned_64x64_rf_sm50", "(PyTorch's mem_eff_attention kernel list; no trace here)"),
    # --- NVIDIA: Tensor Core families ---
    _row("cuBLASLt nvjet", r"^nvjet_", TC, "nvjet_sm90_tst_", "tests/data/kineto/transformer.pt.trace.json.gz"),
    _row("cuBLAS/cuDNN/TensorRT xmma", r"sm\d+a?_xmma_\w*?(?:f16|bf16|tf32|e4m3|e5m2|i8|s8|fp8)", TC,
         "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc", "tests/data/kineto/resnet.pt.trace.json.gz", _I),
    _row("CUTLASS 2 tensorop", r"cutlass\w*?_tensorop|tensorop_\w*gemm|MmaTensorOp|OpClassTensorOp", TC,
         "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_f16_", "tests/data/kineto/resnet.pt.trace.json.gz"),
    _row("CUTLASS 3 / Hopper-Blackwell", r"cutlass3x_sm\d+|Mainloop\w*?(?:Gmma|Umma|Sm90|Sm100)|GmmaWarpSpecialized|"
         r"sm100_|sm120_|tcgen05", TC, "void cutlass::device_kernel<detail::enable_3x_kernel_for_sm9x<gemm::GemmUniversal<",
         _NCU),
    # DeepSeek's FP8 grouped GEMMs (DeepGEMM's kernels as built into their trainer): warp-specialised WGMMA kernels
    # of 384 threads (one producer and two consumer warpgroups) with 218 kB of shared memory, on an H800.
    _row("DeepGEMM", r"dpsk::grouped_gemm::.*GemmKernel|deep_gemm::", TC,
         "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>", _DS),
    _row("FlashAttention 2", r"flash_fwd|flash_bwd", TC, "void pytorch_flash::flash_fwd_kernel<",
         _S + "external/tracelens_h100_Qwen1.5-0.5B-Chat.json.gz"),
    _row("FlashAttention 3", r"flash::FlashAttn(?:Fwd|Bwd)|FlashAttnFwdSm\d+|FlashAttnBwdSm\d+|flash::compute_attn",
         TC, "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192", _DS),
    _row("memory-efficient attention (CUTLASS fmha)", r"fmha_cutlass[FB]_", TC, "fmha_cutlassF_bf16_aligned_", _NCU),
    _row("cuDNN SDPA", r"cudnn_generated_fort_native_sdpa", TC,
         "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "tests/data/compiled/compiled_lm.pt.trace.json.gz"),
    _row("TensorRT-LLM Blackwell GEMM/attention", r"fmhaSm1\d\d|(?:bmm|gemm)_\w*_sm1\d\d[a-z]?$|fmha_", TC,
         "fmhaSm100aKernel_QkvE4m3OBfloat16H64", _S + "external/tracelens_b200_eager_trace.json.gz"),
    _row("Triton template matmul (Inductor)", r"^triton_tem_", TC_LOW_PRECISION, "triton_tem_fused_gelu_gelu_backward_mm_t_0",
         "tests/data/compiled/compiled_max.sqlite.xz"),
    # The MMA instruction shape of cuBLAS/cuDNN/TensorRT kernels (Volta h884/s884, Turing 1688/i8816, Ampere+
    # 16816/16832, WMMA 161616), a tensorNxMxK tile, or an MMA instruction named outright.
    _row("MMA shape or instruction in the name", r"(?<![0-9x])(?:884|1688|16816|16832|8816|8832|161616)(?![0-9x])|"
         r"tensor\d+x\d+x\d+|(?<![a-z])(?:hmma|imma|dmma|wmma|gmma|wgmma|umma)|_hgemm|bf16gemm|_h[0-9]+gemm", TC,
         "ampere_fp16_s16816gemm_fp16_", _S + "external-2026-12/gpumodel_a100_cu128_trace.json", _I),
    # --- last: a matrix kernel whose name does not say the engine (Triton attention on ROCm, unknown GEMMs) ---
    _row("matrix kernel, engine not named", r"(?<!fb)gemm|gemv|matmul|fprop|dgrad|wgrad|implicit_gemm|convolution|"
         r"conv[123]d|(?<![A-Za-z])attn(?![A-Za-z])|attention", MATRIX_UNKNOWN, "attn_fwd",
         _S + "external/tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz", _I),
)

#: dtypes that some generation of Tensor Cores takes (fp32 through TF32). fp64 only on A100/H100/B200, whose
#: DMMA kernels are recognised by name; a fp64 kernel that did not use them shows '-'.
TC_DTYPES = frozenset({"float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", None})

#: Names are classified by their first NAME_SCAN_CHARS characters. Real kernel names are a few kB (the longest
#: CUTLASS template instantiations about 10 kB); the rules' alternations cost about 2 s a MB, so a name of
#: megabytes (a corrupt export's, a fuzzer's) would take prof seconds per distinct name. The caches are keyed by
#: the cut name, so that they never hold a huge one.
NAME_SCAN_CHARS = 1 << 16


def family_of(name: str) -> Family | None:
    """The first row of FAMILIES whose pattern is found in the kernel name, or None."""
    return _family_of(name[:NAME_SCAN_CHARS])


@lru_cache(maxsize=65536)
def _family_of(name: str) -> Family | None:
    for family in FAMILIES:
        if family.pattern.search(name):
            return family
    return None


def library_helper(name: str) -> bool:
    """True for a kernel of a matrix library (cuBLAS, cuDNN, CUTLASS, FlashAttention, DeepGEMM, Tensile) that
    multiplies nothing: a helper of its GEMM/convolution/attention call, to which Tensor Cores do not apply."""
    family = family_of(name)
    return family is not None and family.answer == HELPER


def tc_used(name: str) -> bool | None:
    """True if the kernel name says Tensor Cores, False if it says a CUDA-core matrix kernel, else None (also
    for a family whose engine depends on the dtype: TC_LOW_PRECISION)."""
    family = family_of(name)
    if family is None:
        return None
    return {TC: True, CUDA_CORES: False}.get(family.answer)


#: How the TC column shows a kernel's Tensor Core state (docs/prof.md): used, eligible but not used, not applicable.
TC_TEXT = {True: "yes", False: "no", None: "-"}


def tc_state(name: str, matrix_role: bool, dtype: str | None) -> bool | None:
    """Whether the kernel ran on Tensor Cores: True (it did), False (it could have and did not: a matrix kernel
    of a Tensor Core dtype), None (not applicable). The TC column shows these as TC_TEXT says.

    ``matrix_role`` says the kernel is the matrix kernel of a GEMM/convolution/attention call; ``dtype`` is the
    op's input dtype (None when the marker did not record it).
    """
    return _tc_state(name[:NAME_SCAN_CHARS], matrix_role, dtype)


@lru_cache(maxsize=65536)
def _tc_state(name: str, matrix_role: bool, dtype: str | None) -> bool | None:
    family = _family_of(name)
    answer = family.answer if family else None
    if answer == TC or (answer == TC_LOW_PRECISION and dtype in LOW_PRECISION):
        return True
    if answer in (HELPER, NOT_MATRIX):
        return None
    if (matrix_role or answer in (CUDA_CORES, MATRIX_UNKNOWN, TC_LOW_PRECISION)) and dtype in TC_DTYPES:
        return False
    return None


# dtype tokens in kernel names, most specific first: used only when the marker did not record dtypes.
_DTYPE_TOKENS = [
    (re.compile(r"e4m3", re.I), "float8_e4m3fn"), (re.compile(r"e5m2", re.I), "float8_e5m2"),
    # cuBLASLt nvjet kernels name their input type first: h = fp16, t = bf16, s = fp32, q = fp8 (inferred from
    # the H200/H100 captures: fp16 ResNet -> nvjet_sm90_hsh_*, bf16 Transformer -> nvjet_sm90_tst_*, e4m3
    # torch._scaled_mm -> nvjet_sm90_qqtst_* in tests/data/ncu/families.csv.gz).
    (re.compile(r"nvjet_(?:sm\d+_)?h"), "float16"), (re.compile(r"nvjet_(?:sm\d+_)?t"), "bfloat16"),
    # (``s(?!m\d)``: the s of fp32, not that of ``sm90_``, which an fp8 ``nvjet_sm90_qq..`` leaves to be found.)
    (re.compile(r"nvjet_(?:sm\d+_)?s(?!m\d)"), "float32"), (re.compile(r"nvjet_(?:sm\d+_)?q"), "float8_e4m3fn"),
    # A GEMM named fp8 without the format (DeepSeek's dpsk::grouped_gemm::cuda::fp8_*): DeepGEMM takes E4M3 only.
    (re.compile(r"(?<!fb)gemm[\w:]*?fp8|fp8[\w:]*?gemm", re.I), "float8_e4m3fn"),
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
