"""Tensor Core rules on real kernel names (H100/H200, A100, V100, T4 captures and cuDNN/cuBLAS/CUTLASS/flash),
and AMD matrix-core rules on Tensile/hipBLASLt, Composable Kernel and MIOpen names."""
from __future__ import annotations

import pytest

from pyprof.prof.model.tensorcores import tc_state, tc_used

TC = [
    # H200 captures (tests/data/kineto): cuBLASLt, cuDNN, CUTLASS, cuDNN SDPA
    "nvjet_sm90_hsh_64x64_64x13_2x1_v_bz_splitK_NTT",
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
    "sm90_xmma_wgrad_indexed_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x64x64_warpgroupsize1x1x1_g1_"
    "execute_segment_k_off_kernel__5x_cudnn",
    "sm90_xmma_fprop_image_first_layer_f16f16_f32_f16_nhwckrsc_nhwc_hmma_k64c4r7s7_stride2x2_tile16x64x64_tensor1688_"
    "execute_kernel_kernel__5x_cudnn",
    "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_f16_64x128_64x3_nt_align8>(cutlass_80_tensorop_s16816gemm_"
    "f16_64x128_64x3_nt_align8::Params)",
    "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT",
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
    "volta_h884gemm_64x64_ldg8_nn",
    "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn",
    "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)",
    "cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized",
    "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x128x32_stage4_warpsize2x2x1_g1_"
    "tensor16x8x16_kernel",
    "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x32_stage4_warpsize2x2x1_g1_"
    "tensor16x8x8",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>"
    "(Flash_fwd_params)",
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>(Flash_bwd_params)",
    "fmha_cutlassF_bf16_aligned_64x128_rf_sm80",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
    "volta_fp16_hmma_implicit_gemm_fprop_fp32_nchw_kernel",
    "sm86_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize32x32x64_stage5_warpsize2x2x1"
    "_g1_tensor16x8x16_kernel",
]
SIMT = [
    "sgemm_128x128x8_NN_vec",
    "ampere_sgemm_128x64_nn",
    "volta_sgemm_128x64_tn",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel"
    "__51a_cublas",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(cublasGemvParams)",
    "void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>(int)",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(Params)",
]
NOT_MATRIX = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
    "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(float*, float const*, int)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>",
    "void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(Params)",
    "Memcpy HtoD (Pageable -> Device)",
    # cuDNN/cuBLAS helpers whose template arguments name GEMMs (H200 ResNet/Transformer captures)
    "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm::"
    "wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params> >(xmma__5x_cudnn::implicit_gemm::"
    "wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params>, bool)",
    "void nhwcAddPaddingKernel<__half, __half, float, true, (cudnnKernelDataType_t)0>(int, int, int, __half const*)",
    "void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*, void*, unsigned int)",
    "void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int, unsigned int)",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, false, float, __half, __half, true, "
    "false, false, false>(cublasLt::cublasSplitKParams<float>, __half const*)",
]


# AMD. Tensile GEMMs of the MI300X trace (TraceLens' Qwen1.5 capture): _MI16x16x1_ is the MFMA instruction.
TENSILE_MI300 = "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_" \
    "CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA1024_LBSPPB512_LBSPPM0_LPA16"
AMD_MATRIX = [
    TENSILE_MI300,
    "Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0",
    "Custom_Cijk_Alik_Bljk_HHS_BH_MT256x256x64_MI32x32x8_SN_1LDSB1",  # hand-written: Tensile keeps the MI token
    # Composable Kernel (its gridwise GEMMs on MFMA are named xdl; ck::kernel_... as a demangled name)
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>, true>"
    "(ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>::Argument)",
    "void ck::kernel_grouped_conv_bwd_weight_xdl_cshuffle<ck::GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops_bwd_weight<>>()",
    # MIOpen's implicit-GEMM convolutions on xdlops
    "igemm_fwd_gtcx3_nhwc_fp16_bx0_ex1_bt256x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x4x1_1x4x1x64_tb1x8x2x1_1x4x1x64",
]
AMD_VECTOR = [
    "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1_AF0EM1_AF1EM1_AMAS0_ASE_ASGT_ASLT_ASAE01_ASCE01_ASEM1_MAD",  # no MI
    "void ck::kernel_gemm_dl_v1r3<ck::GridwiseGemmDl_km_kn_mn_v1r3<256, float>, true, true>()",  # CK's DL path
]
AMD_HELPERS = ["Cijk_S", "Cijk_H_GA", "Cijk_Ailk_Bljk_S_PostGSU8_VW1", "WSFlags"]


@pytest.mark.parametrize("name", AMD_MATRIX)
def test_amd_matrix_core_names(name):
    assert tc_used(name) is True
    assert tc_state(name, True, "bfloat16") is True


@pytest.mark.parametrize("name", AMD_VECTOR)
def test_amd_vector_alu_matrix_kernels_are_eligible_but_unused(name):
    assert tc_used(name) is False
    assert tc_state(name, True, "float16") is False


@pytest.mark.parametrize("name", AMD_HELPERS)
def test_tensile_helpers_multiply_nothing(name):
    from pyprof.prof.model.kernels import is_helper

    assert tc_used(name) is None and tc_state(name, True, "float16") is None and is_helper(name)


@pytest.mark.parametrize("name", TC)
def test_tensor_core_names(name):
    assert tc_used(name) is True
    assert tc_state(name, True, "bfloat16") is True


@pytest.mark.parametrize("name", SIMT)
def test_cuda_core_matrix_kernels_are_eligible_but_unused(name):
    assert tc_used(name) is False
    assert tc_state(name, True, "float32") is False  # fp32 could have run as TF32
    assert tc_state(name, False, None) is False  # named like a matrix kernel: eligible even without the op


@pytest.mark.parametrize("name", NOT_MATRIX)
def test_other_kernels_are_not_applicable(name):
    assert tc_used(name) is None
    assert tc_state(name, False, "float16") is None
    if "workspace" in name or "Padding" in name or "splitK" in name:
        assert tc_state(name, True, "float16") is None  # even as a kernel of a convolution/GEMM call


def test_fp64_matrix_kernel_without_dmma_is_not_applicable():
    assert tc_state("volta_dgemm_64x64_nn", True, "float64") is None


def test_rules_agree_with_the_hardware_counters():
    """tests/data/ncu/tensor_cores.csv: every distinct kernel of the H200 example steps, with Nsight Compute's
    tensor-pipe instruction counts (1 when HMMA minus HFMA2, GMMA or IMMA instructions ran)."""
    import csv
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "data", "ncu", "tensor_cores.csv")
    rows = list(csv.DictReader(open(path)))
    assert len(rows) > 100
    wrong = [(r["kernel"], r["tensor_cores"]) for r in rows if bool(tc_used(r["kernel"])) != (r["tensor_cores"] == "1")]
    assert not wrong, wrong
