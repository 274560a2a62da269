"""What an op's family decides (registry.Family), on the kernel names real captures hold: which kernels of a call
are helpers, what counts toward the FlopCounterMode comparison, the TC column and the dgrad/wgrad roles. Kernel
names are copied from the committed H200 captures (tests/data/nsys) unless a comment says where from."""
from __future__ import annotations

import pytest

from pyprof.common import UsageError
from pyprof.prof.model import registry
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.model.registry import COUNTED_FAMILIES, Family

from .helpers import S, T, rec

# cuBLASLt's GEMM on Hopper, the bias epilogue fused (transformer capture)
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
# cuDNN's implicit-GEMM convolution (resnet capture)
CUDNN_FPROP = ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize256x64x32_warpgroupsize1x1x1_g1_"
               "execute_segment_k_off_kernel__5x_cudnn")
PAD = ("void nhwcAddPaddingKernel<__half, __half, float, (bool)1, (cudnnKernelDataType_t)0>(int, int, int, int, int, int, "
       "int, int, const T1 *, T2 *, int, int, int, int, T3, T3, cudnn::reduced_divisor, cudnn::reduced_divisor)")
# the broadcast multiply torch.outer and x * y run (resnet capture)
MUL = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float, "
       "at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)3>>(int, T2, T3)")
# a bias gradient's column sum in a linear's backward node (transformer capture)
SUM = ("void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<"
       "c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator ()(at::TensorIterator &)"
       "::[lambda(float, float) (instance 1)]>, unsigned int, c10::BFloat16, (int)4, (int)4>>(T3)")


def test_every_family_is_named_and_the_matrix_ones_are_counted():
    assert {f.value for f in Family} == {"gemm", "conv", "attention", "norm", "pointwise", "reduce", "loss", "optim",
                                         "memory", "misc", "other", "transfer"}
    assert COUNTED_FAMILIES == {Family.GEMM, Family.CONV, Family.ATTENTION}  # what FlopCounterMode counts
    assert f"{Family.GEMM}" == str(Family.GEMM) == "gemm"  # tables and messages print the value


def test_a_gemm_call_gives_its_flops_to_the_library_kernel_and_the_tc_state_says_so():
    m = Modeller()
    lin = [T([4088, 4096], "bfloat16"), T([1024, 4096], "bfloat16"), T([1024], "bfloat16")]
    kw = dict(op="linear", mod="torch.nn.functional", args=lin)
    main = m.model(rec(NVJET, sub=0, **kw))
    assert main.family == Family.GEMM and main.tc is True
    assert main.flops == 34_292_629_504  # 2·M·N·K = 2·4088·1024·4096


def test_a_convolutions_padding_kernel_is_a_helper_and_the_cudnn_kernel_multiplies():
    m = Modeller()
    conv = [T([32, 64, 56, 56], "float16"), T([64, 64, 3, 3], "float16"), T([64], "float16"), S(1, "stride"),
            S(1, "padding")]
    kw = dict(op="conv2d", mod="torch.nn.functional", args=conv)
    pad = m.model(rec(PAD, sub=0, **kw))
    main = m.model(rec(CUDNN_FPROP, sub=1, **kw))
    assert pad.flops is None and "helper" in pad.reason and pad.tc is None
    # 2·N·K·C·R·S·P·Q = 2·32·64·64·3·3·56·56 (stride 1, padding 1: 56×56 out)
    assert main.flops == 7_398_752_256 and main.tc is True and main.family == Family.CONV


def test_a_linear_backward_gives_dgrad_then_wgrad_and_its_bias_sum_is_a_helper():
    m = Modeller()
    lin = [T([4088, 1024], "bfloat16"), T([4096, 1024], "bfloat16"), T([4096], "bfloat16")]
    fwd = {"mod": ["torch.nn.functional"], "op": ["linear"], "args": lin}
    kw = dict(op="AddmmBackward0", mod="aten", dir="bprop", fwd=fwd, seq=(7,))
    bias = m.model(rec(SUM, sub=0, **kw))
    d = m.model(rec("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", sub=1, **kw))
    w = m.model(rec("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", sub=2, **kw))
    assert bias.flops is None and "helper" in bias.reason
    # each gradient is one GEMM of the forward's size: 2·4088·4096·1024
    assert (d.role, d.flops) == ("dgrad", 34_292_629_504) and (w.role, w.flops) == ("wgrad", 34_292_629_504)


def test_a_pointwise_kernel_does_the_work_and_has_no_tc_state():
    m = Modeller()
    r = m.model(rec(MUL, op="mul", mod="torch", args=[T([1024, 1]), T([2048])]))
    assert r.flops == 2_097_152 and r.family == Family.POINTWISE and r.tc is None  # 1024·2048 products


def test_an_outer_product_keeps_its_flops_on_its_elementwise_kernel():
    """torch.outer runs the broadcast multiply above: were it a GEMM, that kernel would be a helper and the
    M·N FLOPs lost (issue 14's case)."""
    m = Modeller()
    r = m.model(rec(MUL, op="outer", mod="torch", args=[T([1000]), T([2000])]))
    assert r.flops == 2_000_000  # 1000·2000 multiplies
    assert r.bytes == (1000 + 2000 + 2_000_000) * 4  # x and y read, the 1000×2000 product written, fp32
    assert r.family == Family.POINTWISE and r.family not in COUNTED_FAMILIES


def test_the_flop_counter_comparison_sums_only_the_counted_families():
    m = Modeller()
    cov = Coverage()
    lin = [T([4088, 4096], "bfloat16"), T([1024, 4096], "bfloat16"), T([1024], "bfloat16")]
    for d in (rec(NVJET, op="linear", mod="torch.nn.functional", args=lin, dur=100),
              rec(MUL, op="outer", mod="torch", args=[T([1000]), T([2000])], dur=100, seq=(2,))):
        cov.add(100, m.model(d))
    assert cov.counted_flops == 34_292_629_504  # the GEMM's, not the outer product's 2,000,000


def test_a_plugin_may_name_its_family_by_value_and_an_unknown_one_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the test's formula goes with it

    @registry.register("test_family.fused_op", family="pointwise")
    def fused(a):  # pragma: no cover - never called
        raise AssertionError

    assert registry.get("test_family.fused_op").family is Family.POINTWISE
    with pytest.raises(UsageError, match=r"family 'matmul' is not one of gemm, conv, attention, .*other$"):
        registry.register("test_family.other", family="matmul")

