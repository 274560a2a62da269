"""The Tensor Core name table (pyprof/prof/tensorcores.FAMILIES) on real kernel names read from the traces that
hold them, and against Nsight Compute's tensor-pipe counters of one case of each family PyTorch launches
(tests/data/ncu/families.csv.gz, made by tests/data/ncu_families.sh on an H100)."""
from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import os
import sqlite3
import tempfile
from functools import lru_cache

import pytest

from shared_files import CORPUS, require_shared
from pyprof.prof.model.tensorcores import (FAMILIES, HELPER, dtype_from_kernel_name, family_of, library_helper,
                                     tc_state, tc_used)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NCU = "tests/data/ncu/families.csv.gz"
DS = "../shared/corpus/external-2026-12/deepseek_profile-data_train_h800.json"
MI300_QWEN = "../shared/corpus/external/tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz"


def _path(source: str) -> str:
    if source.startswith("../shared/corpus/"):
        require_shared()
        return str(CORPUS / source[len("../shared/corpus/"):])
    return os.path.join(ROOT, source)


def _open(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


@lru_cache(maxsize=None)
def kernel_names(source: str) -> frozenset:
    """Every kernel name a trace holds, read without pyprof: Kineto JSON's kernel events, an Nsight Systems
    export's demangled and short names, or Nsight Compute CSV's Kernel Name column."""
    path = _path(source)
    if ".csv" in path:
        with _open(path) as f:
            return frozenset(r["Kernel Name"] for r in csv.DictReader(io.TextIOWrapper(f, "utf-8")))
    if ".sqlite" in path:
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "export.sqlite")
            with _open(path) as f, open(db, "wb") as out:
                out.write(f.read())
            con = sqlite3.connect(db)
            rows = con.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                               "ON s.id IN (k.demangledName, k.shortName)").fetchall()
            con.close()
        return frozenset(r[0] for r in rows)
    with _open(path) as f:
        trace = json.load(f)
    return frozenset(e["name"] for e in trace.get("traceEvents", []) if str(e.get("cat", "")).lower() == "kernel")


def real_name(source: str, part: str) -> str:
    """The trace's kernel name that contains ``part`` (the shortest, to be deterministic)."""
    found = sorted((n for n in kernel_names(source) if part in n), key=lambda n: (len(n), n))
    assert found, f"no kernel name containing {part!r} in {source}"
    return found[0]


# One case per family: (family, trace, part of the real name, tc_used, why). The answers come from the hardware
# counters where a case ran under ncu (families.csv.gz on an H100, tensor_cores.csv on an H200), else from what
# the library documents about the kernel; they are not read from the table under test.
T, F, N = True, False, None
CASES = [
    ("cuBLAS/cuBLASLt helper", "tests/data/kineto/resnet.pt.trace.json.gz", "splitKreduce_kernel", N,
     "split-K reduction after a GEMM: 0 tensor-pipe instructions (ncu, resnet)"),
    ("cuDNN helper", "tests/data/kineto/resnet.pt.trace.json.gz", "init_device_workspace_kernel", N,
     "workspace set-up: 0 tensor-pipe instructions (ncu, resnet)"),
    ("CUTLASS helper", NCU, "prepare_grouped_gemm_data", N, "ncu: 0 tensor-pipe instructions"),
    ("attention helper", DS, "FlashAttnBwdPreprocess", N, "FA3's dO*O row sums before the backward: element-wise"),
    ("attention helper", DS, "FlashAttnBwdPostprocessConvertdQ", N, "FA3's fp32 dQ to bf16 conversion"),
    ("attention helper", NCU, "flash_fwd_splitkv_combine_kernel", N, "ncu: 0 tensor-pipe instructions"),
    ("attention helper", NCU, "flash_bwd_dot_do_o_kernel", N, "ncu: 0 tensor-pipe instructions"),
    ("DeepGEMM helper", DS, "dpsk::grouped_gemm::cuda::utils::transpose<", N, "a transpose of the FP8 operands"),
    ("DeepGEMM helper", DS, "fill_tensormaps_kernel", N, "writes the TMA descriptors of the grouped GEMM"),
    ("MIOpen tensor-op helper", "../shared/corpus/external/tracelens_mi300_resnet_act_checkpoint.json.gz",
     "SubTensorOpWithCastTensor1d", N, "MIOpen's element-wise kernel on a tensor slice (its name says TensorOp)"),
    ("Triton element-wise/reduction", "tests/data/compiled/compiled_lm.pt.trace.json.gz", "triton_poi_fused", N,
     "Inductor's pointwise kernels (ncu: triton_poi_* 0 tensor-pipe instructions)"),
    ("TensorRT pooling", "../shared/corpus/external/nsys2023.1_memfusion_tensorrt.sqlite", "xmma_pooling", N,
     "pooling multiplies nothing, though built on TensorRT's xmma framework"),
    ("triton_kernels finalize/scatter", "../shared/corpus/external/tracelens_vllm_decode_full_graph_execution.json.gz",
     "_finalize_matmul_scatter", N, "scatters and sums the MoE matmul's rows"),
    ("Tensile/hipBLASLt GEMM on MFMA", MI300_QWEN, "_MI16x16x1_", T, "Tensile writes _MI.. only for MFMA kernels"),
    ("Composable Kernel xdl / MIOpen gtcx", "../shared/corpus/external/tracelens_mi300_resnet_act_checkpoint.json.gz",
     "xdlops", T, "CK's xdlops = MFMA"),
    ("triton_kernels matmul_ogs", "../shared/corpus/external/tracelens_vllm_decode_full_graph_execution.json.gz",
     "_matmul_ogs_NNT_bf16", T, "tl.dot on bf16 tiles of 16 and more lowers to MFMA"),
    ("CUDA-core GEMM/convolution", "tests/data/kineto/lenet.pt.trace.json.gz", "_ffma_", F,
     "ncu (lenet): 0 tensor-pipe instructions"),
    ("CUDA-core GEMM/convolution", NCU, "fft2d_r2c", F, "ncu: fp32 convolution by FFT, 0 tensor-pipe instructions"),
    ("CUDA-core GEMM/convolution", "../shared/corpus/external/kineto_tbplugin_resnet50_nw0_2021-06.pt.trace.json.gz",
     "volta_scudnn_128x64_relu", F, "cuDNN's fp32 implicit GEMM on FMAs (its Tensor Core kernels say h884/s884)"),
    ("cuBLASLt nvjet", NCU, "nvjet_sm90_qqtst", T, "ncu: fp8 torch._scaled_mm ran GMMA"),
    ("cuBLASLt nvjet", "tests/data/kineto/transformer.pt.trace.json.gz", "nvjet_sm90_tst_", T, "ncu: GMMA (H200)"),
    ("cuBLAS/cuDNN/TensorRT xmma", "tests/data/kineto/resnet.pt.trace.json.gz", "sm90_xmma_fprop_implicit_gemm_f16", T,
     "ncu: GMMA (H200)"),
    ("CUTLASS 2 tensorop", "tests/data/kineto/resnet.pt.trace.json.gz", "cutlass_80_tensorop_s16816gemm_f16", T,
     "ncu: HMMA (H200)"),
    ("CUTLASS 2 tensorop", "tests/data/nsys/pyprof/checkpoint.sqlite.xz", "ImplicitGemmConvolution", T,
     "cuDNN's CUTLASS convolution with warp::MmaTensorOp"),
    ("CUTLASS 3 / Hopper-Blackwell", NCU, "MainloopSm90ArrayTmaGmmaWarpSpecialized<", T,
     "ncu: torch._grouped_mm bf16 ran GMMA"),
    ("DeepGEMM", DS, "fp8_ptp128c::GemmKernel", T, "FP8 WGMMA kernel, 384 threads = 1 producer + 2 consumer warpgroups"),
    ("DeepGEMM", DS, "m_grouped_fp8_ptp128c::GemmKernel", T, "the same, grouped by expert (M)"),
    ("FlashAttention 2", NCU, "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", T, "ncu: HMMA"),
    ("FlashAttention 3", DS, "flash::compute_attn_ws<", T, "FA3's warp-specialised forward (WGMMA)"),
    ("FlashAttention 3", DS, "flash::FlashAttnBwd<", T, "FA3's backward mainloop (WGMMA)"),
    ("memory-efficient attention (CUTLASS fmha)", NCU, "fmha_cutlassF_f32_aligned_64x64_rf_sm80", T,
     "ncu: the fp32 sm80 kernel ran HMMA (TF32) although TF32 matmuls were off"),
    ("cuDNN SDPA", "tests/data/compiled/compiled_lm.pt.trace.json.gz", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
     T, "ncu: GMMA"),
    ("TensorRT-LLM Blackwell GEMM/attention", "../shared/corpus/external/tracelens_b200_eager_trace.json.gz",
     "fmhaSm100aKernel", T, "TensorRT-LLM's Blackwell attention (tcgen05)"),
    ("Triton template matmul (Inductor)", "tests/data/compiled/compiled_max.sqlite.xz", "triton_tem_fused", N,
     "Tensor Cores for 16/8-bit inputs only: the name does not say the dtype (see test_triton_template_by_dtype)"),
    ("MMA shape or instruction in the name", "../shared/corpus/external-2026-12/gpumodel_a100_cu128_trace.json",
     "s16816gemm", T, "Ampere's m16n8k16 HMMA"),
    ("MMA shape or instruction in the name", NCU, "sm90_xmma_gemm_f64f64", T, "ncu: DMMA (fp64 Tensor Cores)"),
    ("matrix kernel, engine not named", MI300_QWEN, "attn_fwd", N, "Triton attention on ROCm: the name does not say"),
]


@pytest.mark.parametrize("family,source,part,used,why", CASES, ids=[f"{c[0]}:{c[2]}" for c in CASES])
def test_family_on_a_real_name(family, source, part, used, why):
    name = real_name(source, part)
    assert family_of(name).name == family, (name[:200], why)
    assert tc_used(name) is used, why
    assert library_helper(name) is (family.endswith("helper")), why
    if family.endswith("helper"):
        assert tc_state(name, True, "bfloat16") is None  # a helper of a GEMM call is never '0'


def test_every_family_has_a_case_and_its_example_is_real():
    assert {f.name for f in FAMILIES} - {c[0] for c in CASES} == {
        "Tensile helper", "Tensile GEMM on vector ALUs", "Composable Kernel DL",
        "memory-efficient attention fp32 pre-Ampere"}  # no trace holds these: tests/prof/test_tensorcores.py
    for f in FAMILIES:
        if f.source.startswith("(") or (f.source.startswith("../shared") and not CORPUS.is_dir()):
            continue
        assert family_of(real_name(f.source, f.example)) is f, f.name


def test_triton_template_by_dtype():
    """tl.dot uses Tensor Cores on fp16/bf16 (ncu: triton_tem_fused_mm_relu_0 of a bf16 matmul ran HMMA); on fp32
    only with TF32 allowed, which Inductor takes from torch.backends.cuda.matmul.allow_tf32 (off by default):
    examples/compiled.py's fp32 MLP stays '0'."""
    name = real_name("tests/data/compiled/compiled_max.sqlite.xz", "triton_tem_fused")
    assert tc_state(name, True, "bfloat16") is True
    assert tc_state(name, True, "float32") is False


def test_deepgemm_reads_fp8():
    name = real_name(DS, "fp8_dptp128c_acc::GemmKernel")
    assert dtype_from_kernel_name(name) == "float8_e4m3fn"
    assert dtype_from_kernel_name(real_name(NCU, "nvjet_sm90_qqtst")) == "float8_e4m3fn"  # torch._scaled_mm e4m3


def test_deepseek_trace_end_to_end(tmp_path):
    """The H800 trace through parse and prof: every DeepGEMM GEMM is TC 1, its helpers and FA3's pre/post-process
    '-'. The counts are recounted from the trace's JSON."""
    import subprocess
    import sys

    src = _path(DS)
    events = [e for e in json.load(open(src))["traceEvents"] if e.get("cat") == "kernel"]
    gemms = sum("dpsk::grouped_gemm" in e["name"] and "GemmKernel" in e["name"] for e in events)
    helpers = sum("grouped_gemm::cuda::utils::" in e["name"] or "FlashAttnBwdP" in e["name"] for e in events)
    assert (gemms, helpers) == (140, 64 + 3 + 8)  # 64 transposes, 3 fill_tensormaps, 4 + 4 FA3 pre/post
    out = tmp_path / "ds.jsonl"
    subprocess.run([sys.executable, "-m", "pyprof.cli", "parse", src, "-o", str(out)], check=True, cwd=ROOT,
                   capture_output=True)
    rows = subprocess.run([sys.executable, "-m", "pyprof.cli", "prof", "-q", "-j", "1", "-c", "idx,tc", "--jsonl",
                           str(out)], check=True, cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
    records = [json.loads(line) for line in open(out) if line.startswith('{"kind":')]
    tc = {json.loads(r)["idx"]: json.loads(r)["tc"] for r in rows}
    by_name: dict = {}
    for i, rec in enumerate(records):
        name = rec.get("kLongName") or ""
        key = "gemm" if "dpsk::grouped_gemm" in name and "GemmKernel" in name else \
            "helper" if "grouped_gemm::cuda::utils::" in name or "FlashAttnBwdP" in name else None
        if key:
            by_name.setdefault(key, []).append(tc[i])
    assert by_name["gemm"] == ["yes"] * gemms
    assert by_name["helper"] == ["-"] * helpers


# --- Nsight Compute: every kernel of tests/data/ncu/families.csv.gz -------------------------------------------
# Each case's input dtype, from tests/data/ncu_families.py (the name of its NVTX range says it).
CASE_DTYPE = {"mm_bf16": "bfloat16", "mm_fp16": "float16", "mm_fp32_tf32_off": "float32", "mm_fp32_tf32_on": "float32",
              "mm_fp64": "float64", "bmm_bf16": "bfloat16", "linear_bias_bf16_fwd_bwd": "bfloat16",
              "gemv_bf16": "bfloat16", "int8_mm": "int8", "scaled_mm_fp8_tensorwise": "float8_e4m3fn",
              "scaled_mm_fp8_rowwise": "float8_e4m3fn", "grouped_mm_bf16": "bfloat16",
              "scaled_grouped_mm_fp8": "float8_e4m3fn", "conv_fp16_channels_last_fwd_bwd": "float16",
              "conv_bf16_fwd_bwd": "bfloat16", "conv_fp32_tf32_off_fwd_bwd": "float32",
              "conv_fp32_tf32_on_fwd_bwd": "float32", "sdpa_cudnn_fwd_bwd": "bfloat16", "sdpa_flash_fwd_bwd": "bfloat16",
              "sdpa_efficient_bf16_fwd_bwd": "bfloat16", "sdpa_efficient_fp32_fwd_bwd": "float32",
              "triton_template_mm_bf16": "bfloat16", "triton_pointwise": "bfloat16"}
_NVTX = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


@lru_cache(maxsize=None)
def ncu_kernels() -> tuple:
    """(case, kernel name, tensor-pipe MMA instructions) per launch. MMA instructions = HMMA minus HFMA2 (Hopper's
    HMMA pipe also runs HFMA2.MMA, ncu_tensor_pipe.sh) plus GMMA, IMMA and DMMA. Backward kernels run on autograd's
    thread, outside the case's NVTX range: they belong to the last case seen (the cases run one after another)."""
    with gzip.open(os.path.join(ROOT, NCU), "rt") as f:
        rows = list(csv.DictReader(f))
    launches: dict = {}
    for r in rows:
        metric = r["Metric Name"].replace("sm__inst_executed_pipe_tensor_op_", "").replace(".sum", "")
        launch = launches.setdefault(int(r["ID"]), {"nvtx": r[_NVTX], "name": r["Kernel Name"]})
        launch[metric] = float(r["Metric Value"].replace(",", ""))
    out, case = [], None
    for _, l in sorted(launches.items()):
        for c in CASE_DTYPE:
            if f":{c}:" in l["nvtx"]:
                case = c
        mma = l["hmma"] - l["hmma_type_hfma2"] + l["gmma"] + l["imma"] + l["dmma"]
        out.append((case, l["name"], mma))
    return tuple(out)


def test_ncu_run_covers_every_case():
    kernels = ncu_kernels()
    assert len(kernels) == 202  # launches in the CSV (ncu IDs 0..201)
    assert {c for c, _, _ in kernels} == set(CASE_DTYPE)


def test_name_rules_agree_with_the_tensor_pipe_counters():
    """MMA instructions > 0 <=> the TC column says 1 for the kernel as the matrix kernel of its case's dtype;
    a kernel with none is never called TC, and every helper ran none."""
    wrong = []
    for case, name, mma in ncu_kernels():
        state = tc_state(name, family_of(name) is not None, CASE_DTYPE[case])
        if (mma > 0) != (state is True) or (library_helper(name) and mma > 0) or (mma == 0 and tc_used(name)):
            wrong.append((case, name[:120], mma, state))
    assert not wrong, wrong


def test_ncu_families_counted():
    """What the counters found, by family (the report quotes these): Tensor Core kernels and helpers."""
    used = {family_of(n).name for _, n, mma in ncu_kernels() if mma > 0}
    assert used == {"cuBLASLt nvjet", "cuBLAS/cuDNN/TensorRT xmma", "MMA shape or instruction in the name",
                    "CUTLASS 2 tensorop", "CUTLASS 3 / Hopper-Blackwell", "cuDNN SDPA", "FlashAttention 2",
                    "memory-efficient attention (CUTLASS fmha)", "Triton template matmul (Inductor)"}
    helpers = {family_of(n).name for _, n, mma in ncu_kernels() if family_of(n) and family_of(n).answer == HELPER}
    assert helpers == {"cuBLAS/cuBLASLt helper", "cuDNN helper", "CUTLASS helper", "attention helper"}
