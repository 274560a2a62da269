"""What a kernel's name says about its part in an op call: a helper of a GEMM/convolution/attention call
(layout transposes, split-K reductions, casts, RNG set-up) or the kernel that multiplies, and which gradient a
backward GEMM/convolution kernel computes (docs/formulas.md, "Which kernels carry the numbers").

NVIDIA names come from cuBLAS/cuBLASLt (``nvjet``, ``sm90_xmma_gemm``, ``splitKreduce``), cuDNN and CUTLASS;
AMD names from Tensile/hipBLASLt (``Cijk_Ailk_Bljk_..._MT..._MI...``; their beta-only and ``_PostGSU`` passes
are helpers) and Composable Kernel (``ck::kernel_gemm_xdl_cshuffle_v3``, ``gridwise_gemm``).
"""
from __future__ import annotations

import re
from functools import lru_cache

from pyprof.prof.model.tensorcores import NAME_SCAN_CHARS, TENSILE_GEMM, dtype_from_kernel_name, library_helper

# Names that are always helpers: a matrix library's kernels that multiply nothing (tensorcores.library_helper) and
# these, which the Tensor Core rules leave to their other patterns (a Winograd transform names a CUDA-core path):
_ALSO_HELPER = re.compile(
    r"reduce_1Block|reduce_wgrad|CatArrayBatchedCopy|"
    # cuDNN's offset tables (computeOffsetsKernel, computeBOffsetsKernel, computeWgradSplitKOffsetsKernel) and
    # Winograd's data, filter and output transforms around the batched GEMM that multiplies (V100 traces):
    r"compute\w*Offsets|winograd\w*(?:Data|Filter|Output|Delta)\dx\d|generateWinogradTiles|"
    r"clear_dq|at::native::.*reduce_kernel|cunn_SoftMax|softmax_warp", re.IGNORECASE)
# Tensile/hipBLASLt (tensorcores.TENSILE_*): a GEMM is ``Cijk_Ailk_Bljk_<types>_..._MT<tile>_MI<instruction>_...``
# (``Custom_Cijk_...`` for hand-written ones) and carries ``_Bias_`` when its epilogue adds one; the beta-only
# pass before a global-split-U GEMM (``Cijk_S``, ``Cijk_H_GA``), the ``_PostGSU`` reduction after it and
# stream-K's ``WSFlags`` set-up are helpers (Tensile's KernelWriterBetaOnly, KernelWriterConversion and
# KernelWriterStreamKInit name them).
# Names that are helpers unless they also say they multiply matrices (a GEMM with a fused bias epilogue is
# the main kernel, not a helper):
_WEAK_HELPER = re.compile(r"transpose|elementwise_kernel|fill_kernel|memset|copy_kernel|im2col|col2im|cast_kernel|"
                          r"convert_kernel|_bias_|bias_kernel|scale_kernel|reduce_kernel|epilogue_kernel",
                          re.IGNORECASE)
# Names that say the kernel multiplies matrices (with TENSILE_GEMM, whose names carry ``_Bias_`` when the epilogue
# adds one); Composable Kernel's say gemm or xdl/wmma (its matrix-core paths), MIOpen's implicit GEMMs gtcx.
_MATMUL = re.compile(r"gemm|xmma|nvjet|tensorop|implicit|fprop|dgrad|wgrad|flash_fwd|flash_bwd_dq|fmha|sdpa|"
                     r"xdl|wmma|mfma|gtcx", re.IGNORECASE)


# Kernels that order, move or set data and do none of an op's arithmetic (a radix sort inside an embedding's
# backward, a copy, a fill), unless they also say they multiply matrices.
_NO_ARITHMETIC = re.compile(r"radix|sort|memset|memcpy|copy_kernel|fill_kernel|transpose|CatArray", re.IGNORECASE)


@lru_cache(maxsize=65536)
def does_arithmetic(name: str) -> bool:
    """False for a kernel that only orders, moves or sets data (share.py gives it no share of a call's FLOPs)."""
    name = name[:NAME_SCAN_CHARS]
    return not _NO_ARITHMETIC.search(name) or bool(_MATMUL.search(name) or TENSILE_GEMM.search(name))


def is_helper(name: str) -> bool:
    """True for kernels that only help a GEMM/conv/attention call (transposes, split-K reductions, casts ...)."""
    return _is_helper(name[:NAME_SCAN_CHARS])  # tensorcores.NAME_SCAN_CHARS says why


@lru_cache(maxsize=65536)
def _is_helper(name: str) -> bool:
    return bool(library_helper(name) or _ALSO_HELPER.search(name) or
                (_WEAK_HELPER.search(name) and not (_MATMUL.search(name) or TENSILE_GEMM.search(name))))


_DGRAD = re.compile(r"dgrad", re.IGNORECASE)
_WGRAD = re.compile(r"wgrad", re.IGNORECASE)


def named_role(name: str) -> str | None:
    """dgrad or wgrad when a backward GEMM/conv kernel's name says which gradient it computes (cuDNN, xmma)."""
    name = name[:NAME_SCAN_CHARS]
    if _DGRAD.search(name):
        return "dgrad"
    if _WGRAD.search(name):
        return "wgrad"
    return None


def fill_dtypes(args: list, kernel_name: str) -> tuple[list, bool]:
    """Give tensors without a dtype the one the kernel's name states (emit_nvtx-only markers record shapes
    only). A modelling shortcut: the params string then ends with ``dtype-from-kernel``. Returns (args, filled)."""
    missing = any(isinstance(e, dict) and (("shape" in e and not e.get("dtype")) or
                                           any(isinstance(i, dict) and not i.get("dtype") for i in e.get("items") or ()))
                  for e in args)
    if not missing:
        return args, False
    guess = dtype_from_kernel_name(kernel_name)
    if guess is None:
        return args, False
    out = []
    for e in args:
        if isinstance(e, dict) and "shape" in e and not e.get("dtype"):
            e = {**e, "dtype": guess}
        elif isinstance(e, dict) and e.get("items"):
            e = {**e, "items": [{**i, "dtype": guess} if isinstance(i, dict) and not i.get("dtype") else i
                                for i in e["items"]]}
        out.append(e)
    return out, True


_LOW_PRECISION = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})


def autocast(args: list, kernel_name: str, guessed: bool) -> tuple[list, bool]:
    """Under autocast an op's fp32 arguments are cast inside it and its GEMM/conv kernel runs in fp16/bf16;
    the kernel's name says so. Then the fp32 tensors are taken at the kernel's dtype (bytes, roofline peak),
    and the params string ends with ``dtype-from-kernel``."""
    kd = dtype_from_kernel_name(kernel_name)
    if kd not in _LOW_PRECISION or not any(isinstance(e, dict) and e.get("dtype") == "float32" for e in args):
        return args, guessed
    out = []
    for e in args:
        if isinstance(e, dict) and "shape" in e and e.get("dtype") == "float32":
            e = {**e, "dtype": kd}
        out.append(e)
    return out, True
