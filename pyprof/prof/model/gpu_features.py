"""Which matrix formats a GPU's Tensor Cores (AMD: matrix cores) take, by architecture, for the rules that
recommend a format: a GPU is found by the same device name as its peaks (pyprof.prof.model.peaks, whose rows carry
the architecture), never by the compute capability alone, which AMD's runtime reports too (an MI300X says
9.4, an MI250X 9.0: Hopper's number). docs/roofline.md cites the architecture whitepapers.

A feature is a peaks unit name (``fp16_tc``, ``bf16_tc``, ``tf32_tc``, ``fp8_tc``, ``int8_tc``, ``fp64_tc``)
or ``int4_tc`` / ``fp4_tc``, which have no peak column.
"""
from __future__ import annotations

from typing import NamedTuple

from pyprof.prof.model.args import dtype_info
from pyprof.prof.model.peaks import GpuPeaks

_VOLTA = frozenset({"fp16_tc"})
_TURING = _VOLTA | {"int8_tc", "int4_tc"}  # sm_72 (Xavier) has int8 without int4
_AMPERE_GA10X = _TURING | {"bf16_tc", "tf32_tc"}
_HOPPER = frozenset({"fp16_tc", "bf16_tc", "tf32_tc", "fp64_tc", "int8_tc", "fp8_tc"})  # int4 dropped
FEATURES: dict[str, frozenset] = {
    "sm_70": _VOLTA,
    "sm_72": _VOLTA | {"int8_tc"},
    "sm_75": _TURING,
    "sm_80": _AMPERE_GA10X | {"fp64_tc"},  # A100, A30: FP64 on Tensor Cores too
    "sm_86": _AMPERE_GA10X,
    "sm_87": _AMPERE_GA10X,
    "sm_89": _AMPERE_GA10X | {"fp8_tc"},  # Ada
    "sm_90": _HOPPER,
    "sm_100": _HOPPER | {"fp4_tc"},  # Blackwell data-center parts
    "sm_120": (_HOPPER - {"fp64_tc"}) | {"fp4_tc"},  # Blackwell RTX parts
    "gfx90a": frozenset({"fp16_tc", "bf16_tc", "fp64_tc", "int8_tc"}),  # CDNA 2: no TF32, no FP8
    "gfx942": frozenset({"fp16_tc", "bf16_tc", "tf32_tc", "fp64_tc", "int8_tc", "fp8_tc"}),  # CDNA 3
    "gfx950": frozenset({"fp16_tc", "bf16_tc", "fp64_tc", "int8_tc", "fp8_tc", "fp4_tc"}),  # CDNA 4
}

# A dtype's short name (args.dtype_info) -> the Tensor Core feature a matrix product in it needs: fp32 inputs
# go through TF32.
_FEATURE_OF = {"fp16": "fp16_tc", "bf16": "bf16_tc", "fp32": "tf32_tc", "fp8": "fp8_tc", "int8": "int8_tc",
               "uint8": "int8_tc", "fp64": "fp64_tc"}


class Capability(NamedTuple):
    """What a GPU's matrix units take: its name as the table has it, its architecture and its features."""

    name: str
    arch: str
    features: frozenset

    def has(self, feature: str) -> bool:
        """Whether the GPU has ``feature`` (``bf16_tc``, ...)."""
        return feature in self.features

    @property
    def label(self) -> str:
        """``NAME (ARCH)``, as the rules name the GPU."""
        return f"{self.name} ({self.arch})"


def capability(peaks: GpuPeaks | None) -> Capability | None:
    """The Capability of the GPU whose table row is ``peaks`` (pyprof.prof.model.roofline.Peaks.for_gpu); None when
    the GPU is not in the table or its row names no known architecture (a ``--peak`` / ``--bandwidth`` GPU)."""
    if peaks is None or peaks.arch not in FEATURES:
        return None
    return Capability(peaks.name, peaks.arch, FEATURES[peaks.arch])


def feature_for(dtype: str | None) -> str | None:
    """The Tensor Core feature a GEMM or convolution in ``dtype`` (``float16``, ``torch.bfloat16``...) needs;
    None when the dtype is unknown or no Tensor Core format takes it."""
    info = dtype_info(dtype)
    return _FEATURE_OF.get(info[2]) if info else None
