"""Which kernel of an op call carries the numbers, backward roles, memcpys, legacy records, roofline."""
from __future__ import annotations

from pyprof.prof.model.modeller import Modeller, candidates
from pyprof.prof.model.peaks import lookup
from pyprof.prof.load.reader import from_legacy
from pyprof.prof.model.roofline import Peaks, peak_tflops, roofline

from .helpers import S, T, rec

LIN = [T([64, 256], "bfloat16"), T([512, 256], "bfloat16"), T([512], "bfloat16")]  # 2·64·512·256 = 16777216
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"


def test_flops_go_to_the_main_kernel_and_helpers_say_where():
    m = Modeller()
    conv = [T([2, 3, 8, 8], "float16"), T([4, 3, 3, 3], "float16"), S(None), S(1, "stride"), S(1, "padding")]
    kw = dict(op="conv2d", mod="torch.nn.functional", args=conv)
    r0 = m.model(rec("nchwToNhwcKernel", sub=0, **kw))
    r1 = m.model(rec("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_tensor16x8x16_kernel", sub=1, **kw))
    r2 = m.model(rec("nhwcToNchwKernel", sub=2, **kw))
    assert r0.flops is None and "helper" in r0.reason and r0.tc is None
    assert r1.flops == 27648 and r1.tc is True  # 2·2·4·3·9·64
    assert r2.flops is None and "helper" in r2.reason


def test_second_kernel_of_a_pointwise_call_is_counted_on_the_first():
    m = Modeller()
    kw = dict(op="add", mod="torch", args=[T([10]), T([10])])
    assert m.model(rec("elementwise_kernel", sub=0, **kw)).flops == 10
    r = m.model(rec("elementwise_kernel", sub=1, **kw))
    assert r.flops is None and r.reason == "counted on sub 0 of the same add call"
    assert m.model(rec("elementwise_kernel", sub=0, seq=(2,), **kw)).flops == 10  # a new call


def test_backward_gemm_dgrad_then_wgrad_by_order_and_by_name():
    m = Modeller()
    fwd = {"mod": ["torch.nn.functional"], "op": ["linear"], "args": LIN}
    kw = dict(op="AddmmBackward0", mod="aten", dir="bprop", fwd=fwd, seq=(7,))
    bias = m.model(rec("void at::native::reduce_kernel<512, 1>", sub=0, **kw))
    d = m.model(rec(GEMM, sub=1, **kw))
    w = m.model(rec(GEMM, sub=2, **kw))
    assert bias.flops is None and "helper" in bias.reason
    assert (d.role, d.flops) == ("dgrad", 16777216) and d.params.endswith(",dgrad")
    assert (w.role, w.flops) == ("wgrad", 16777216)
    # Names decide when they say it: a call computing only the weight gradient.
    conv = {"mod": ["torch.nn.functional"], "op": ["conv2d"],
            "args": [T([2, 3, 8, 8]), T([4, 3, 3, 3]), S(None), S(1, "stride"), S(1, "padding")]}
    only_w = m.model(rec("sm80_xmma_wgrad_implicit_gemm_tf32f32_tensor16x8x8", op="ConvolutionBackward0", mod="aten",
                         dir="bprop", fwd=conv, seq=(9,), sub=0))
    assert only_w.role == "wgrad" and only_w.flops == 27648


def test_backward_attention_gets_five_gemms_on_the_main_kernel():
    m = Modeller()
    q = T([2, 4, 16, 8], "bfloat16")
    fwd = {"mod": ["aten"], "op": ["aten::_scaled_dot_product_flash_attention"], "args": [q, q, q]}
    kw = dict(op="ScaledDotProductFlashAttentionBackward0", mod="aten", dir="bprop", fwd=fwd, seq=(3,))
    pre = m.model(rec("void pytorch_flash::flash_bwd_dot_do_o_kernel<true>", sub=0, **kw))
    main = m.model(rec("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<>", sub=1, **kw))
    post = m.model(rec("void pytorch_flash::flash_bwd_convert_dq_kernel<>", sub=2, **kw))
    assert pre.flops is None and post.flops is None
    assert main.flops == 163840 and main.tc is True  # 5·2·8·16·16·8


def test_unknown_op_and_missing_forward_link_are_na_with_reasons():
    m = Modeller()
    r = m.model(rec("k", op="my_custom_op", mod="torch"))
    assert r.flops is None and r.reason == "no formula for torch.my_custom_op"
    r = m.model(rec("k", op="MulBackward0", mod="aten", dir="bprop"))
    assert "no forward link" in r.reason
    assert "no op" in m.model(rec("k")).reason


def test_memcpy_and_memset():
    m = Modeller()
    r = m.model({"kind": "memcpy", "kShortName": "Memcpy HtoD", "bytes": 4096, "copy_kind": "HtoD", "kDuration": 10})
    assert (r.flops, r.bytes, r.params, r.tc) == (0, 4096, "HtoD,4096B", None)


def test_lookup_spellings():
    assert "torch.add" in candidates("torch.Tensor", "__iadd__")
    assert "aten::add" in candidates("aten", "aten::add_.Tensor")
    m = Modeller()
    assert m.resolve("torch.Tensor", "__matmul__").fn.__name__ == "matmul"
    assert m.resolve("torch.Tensor", "mul_").fn.__name__ == "pointwise_mul"
    assert m.resolve("aten", "aten::addmm").fn.__name__ == "addmm"
    assert m.resolve("torch", "conv2d").fn.__name__ == "conv_nd"


def test_legacy_dict_line_becomes_a_record():
    d = {"kShortName": "volta_h884gemm_64x64_ldg8_nn", "kDuration": 1000, "layer": [], "trace": [], "reprMarkers": [],
         "marker": ["{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', 'type': 'tensor', "
                    "'shape': (64, 256), 'dtype': 'float16'}, {'name': '', 'type': 'tensor', 'shape': (512, 256), "
                    "'dtype': 'float16'}]}"],
         "seqMarker": [], "seqId": [], "subSeqId": 0, "altSeqId": [], "dir": "bprop", "mod": ["torch.nn.functional"],
         "op": ["linear"], "tid": 1, "device": 0, "stream": 7, "grid": (1, 1, 1), "block": (256, 1, 1)}
    r = Modeller().model(from_legacy(d))
    assert r.role == "dgrad" and r.flops == 16777216 and r.tc is True


def test_roofline_numbers():
    h200 = lookup("NVIDIA H200")
    assert h200.bandwidth_gbps == 4800 and h200.tflops["bf16_tc"] == 989.5
    assert lookup("NVIDIA A100-SXM4-80GB").name == "A100 80GB"
    assert lookup("NVIDIA A10").name == "A10" and lookup("NVIDIA L40S").name == "L40S"
    assert lookup("NVIDIA L4").name == "L4" and lookup("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert lookup("NVIDIA H100 80GB HBM3").name == "H100 SXM" and lookup("Tesla V100-SXM2-16GB").name == "V100 SXM2"
    assert lookup("Tesla T4").name == "T4" and lookup("NVIDIA B200").name == "B200" and lookup("Radeon") is None
    # A100 80GB PCIe has 1935 GB/s, not the SXM part's 2039 (A100 datasheet; docs/roofline.md)
    assert lookup("NVIDIA A100 80GB PCIe").bandwidth_gbps == 1935
    assert lookup("NVIDIA A100-PCIE-40GB").name == "A100 40GB"
    # HGX B200 per-GPU row of NVIDIA's spec table: 7.7 TB/s, TF32 2.2 PF sparse; GB200 GPUs have their own row
    assert lookup("NVIDIA B200").bandwidth_gbps == 7700 and lookup("NVIDIA GB200").name == "GB200"
    assert peak_tflops(h200, "bfloat16", True) == 989.5 and peak_tflops(h200, "bfloat16", None) == 67
    assert peak_tflops(h200, "float32", True) == 494.5  # TF32
    # 989.5e12 FLOP/s → 1e9 FLOPs take 1010.6 ns; 4.8e12 B/s → 4.8e6 B take 1000 ns; measured 2021.2 ns → 50%
    tf, gbps, inten, pct = roofline(10**9, 4_800_000, 2021.2, h200, "bfloat16", True)
    assert round(pct, 1) == 50.0 and round(tf, 1) == 494.8 and round(inten, 1) == 208.3
    # bandwidth-bound: 4.8e6 B at 4800 GB/s = 1000 ns of 4000 ns → 25 %
    assert round(roofline(0, 4_800_000, 4000, h200, "float16", None).roofline_pct, 1) == 25.0


def test_peak_overrides():
    p = Peaks(None, {"bf16_tc": 500.0}, 1000.0)
    g = p.for_gpu("NVIDIA H200")
    assert g.tflops["bf16_tc"] == 500 and g.tflops["fp32"] == 67 and g.bandwidth_gbps == 1000
    assert Peaks(gpu="H100 PCIe").for_gpu("NVIDIA H200").name == "H100 PCIe"


def test_dtype_from_kernel_name_for_emit_nvtx_markers():
    m = Modeller()
    args = [{"type": "tensor", "shape": [64, 256]}, {"type": "tensor", "shape": [256, 512]}]
    r = m.model(rec("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel", op="aten::mm", mod="aten", args=args))
    assert r.bytes == (64 * 256 + 256 * 512 + 64 * 512) * 2 and r.params.endswith("dtype-from-kernel")
    r = m.model(rec("mystery", op="aten::mm", mod="aten", args=args, seq=(5,)))
    assert r.flops == 2 * 64 * 512 * 256 and r.bytes is None and "dtype unknown" in r.reason


def test_helper_kernel_names():
    from pyprof.prof.model.modeller import is_helper

    for name in ["void nchwToNhwcKernel<__half, __half, float, true, false, (cudnnKernelDataType_t)0>(int)",
                 "void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(cublasSplitKParams<float>)",
                 "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
                 "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64>>(Flash_bwd_params)",
                 "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
                 # the one-thread kernel that reads the RNG state for cuDNN attention (ATen's PhiloxUtils)
                 "void at::cuda::philox::unpack_cudnn(at::PhiloxCudaState, long*, long*)",
                 # cuDNN's CUTLASS split-K reduction after a wgrad (H100 checkpoint capture, short name "Kernel")
                 "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<cutlass__5x_cudnn::"
                 "MatrixShape<4, 256>, cutlass__5x_cudnn::epilogue::thread::LinearCombination<>>>()"]:
        assert is_helper(name), name
    for name in ["cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8_bias_",
                 "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas",
                 "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>()",
                 "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "volta_sgemm_128x64_nn",
                 # Tensile GEMMs with a bias epilogue (MI300X trace): main kernels, whatever "_Bias_" says
                 "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1",
                 "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<>>(ck::Argument)"]:
        assert not is_helper(name), name


def test_autocast_takes_the_kernels_precision():
    """Under autocast a conv's fp32 arguments are cast inside it; the cuDNN kernel says f16."""
    m = Modeller()
    conv = [T([2, 3, 8, 8]), T([4, 3, 3, 3]), S(None), S(1, "stride"), S(1, "padding")]
    r = m.model(rec("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_kernel", op="conv2d", mod="aten",
                    args=conv))
    assert r.dtype == "float16" and r.bytes == 4016 // 2 and r.params.endswith("fp16,dtype-from-kernel")
    lin = [T([64, 256]), T([256, 512], "bfloat16")]
    r = m.model(rec("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", op="aten::mm", mod="aten", args=lin, seq=(4,)))
    assert r.bytes == (64 * 256 + 256 * 512 + 64 * 512) * 2  # t = bf16


def test_first_layer_backward_is_weight_gradient_only():
    """pyprof markers say which tensors need a gradient: a convolution whose input needs none (the first
    layer) runs one backward GEMM, the weight gradient, though it is the first main kernel of its node."""
    from pyprof.prof.model.modeller import _gradient_present

    x = {"type": "tensor", "shape": [8, 3, 32, 32], "dtype": "float16", "grad": False}
    w = {"type": "tensor", "shape": [16, 3, 3, 3], "dtype": "float16", "grad": True}
    assert _gradient_present([x, w], "dgrad") == "wgrad"
    assert _gradient_present([dict(x, grad=True), w], "dgrad") == "dgrad"
    assert _gradient_present([dict(x, grad=True), dict(w, grad=False)], "wgrad") == "dgrad"  # frozen weight
    assert _gradient_present([{k: v for k, v in x.items() if k != "grad"}, w], "dgrad") == "dgrad"  # unknown
    assert _gradient_present([x, w], "fprop") == "fprop"


def test_the_no_arguments_reason_names_the_tool_that_recorded_the_record():
    """A GEMM op without arguments: the reason says why for each source, from the record itself (pyprof op
    markers in ``marker``; emit_nvtx ranges in ``seqMarker``, with ``, seq = `` / ``op_id = ``; a PyTorch
    profiler trace has neither), whether the record is decoded whole or lean."""
    import io
    import json

    from pyprof.prof.table.per_kernel import run_stream

    base = dict(op="mm", mod="aten", args=[])
    recs = [rec("k", seq=(1,), marker=[{"pyprof": 1, "mod": "torch", "op": "mm", "call": 3}], seqMarker=[], **base),
            rec("k", seq=(2,), marker=[], seqMarker=["aten::mm, seq = 2, op_id = 7"], **base),
            rec("k", seq=(3,), marker=[], seqMarker=["aten::mm"], **base)]
    want = ["the pyprof marker of mm recorded no arguments",
            "no arguments recorded for mm: its range is autograd's own (emit_nvtx)",
            "the PyTorch profiler recorded no input shapes for mm"]
    # a Modeller per record: the reason is worked out once per op, kernel and arguments
    assert [Modeller().model(r).reason.startswith(w) for r, w in zip(recs, want)] == [True] * 3
    for r, w in zip(recs, want):
        out = io.StringIO()
        run_stream(io.BytesIO(json.dumps(r).encode() + b"\n"), "in", out, ["note"], "jsonl")
        assert json.loads(out.getvalue())["note"].startswith(w)
