"""The matching keys: what each capture calls the same op, kernel, shapes or line maps to one key. The pairs are
written as the captures of tests/data write them (nsys + pyprof.init() on the left, the PyTorch profiler's trace
of the same program on the right), copied from their records, not made by the code under test."""
from __future__ import annotations

import pytest

from pyprof.diff.keys import kernel_name, line_name, op_name, shapes_name


@pytest.mark.parametrize("pyprof_name,aten_name", [
    ("__add__", "add"),  # x + y: the Python operator, and the aten op it dispatches to (transformer)
    ("__iadd__", "add_"),  # out += identity (resnet): in place on both sides
    ("cross_entropy", "cross_entropy_loss"),  # F.cross_entropy runs aten::cross_entropy_loss (every example)
    ("cross_entropy (bprop)", "cross_entropy_loss (bprop)"),  # the direction stays, the name matches
    ("relu", "relu_"),  # F.relu(inplace=True) (resnet): pyprof names the call, the profiler the in-place op
    ("relu (recompute)", "relu_ (recompute)"),  # under activation checkpointing (checkpoint)
    ("float", "to"),  # Tensor.float() dispatches to aten::to (resnet's GradScaler)
    ("__mul__ (bprop)", "mul (bprop)"),
    ("nll_loss", "nll_loss_nd"),  # F.nll_loss runs aten::nll_loss_nd
    ("_foreach_mul_", "_foreach_mul_"),  # the same name stays one name
    ("__invert__", "bitwise_not"),  # ~mask: not an in-place "nvert"
    ("__rshift__", "bitwise_right_shift"),  # x >> 1: not a reflected "shift"
    ("__rtruediv__", "div"),  # 1 / x
])
def test_the_two_names_of_one_op_match(pyprof_name, aten_name):
    assert op_name(pyprof_name) == op_name(aten_name)


@pytest.mark.parametrize("a,b", [
    ("linear", "linear (bprop)"),  # forward and backward stay apart
    ("add", "mul"),
    ("relu", "relu (recompute)"),
    ("_foreach_add", "_foreach_mul"),
])
def test_different_ops_stay_apart(a, b):
    assert op_name(a) != op_name(b)


# The same kernels as Nsight Systems and the PyTorch profiler write them (transformer_foreach.sqlite.xz and
# transformer_foreach.pt.trace.json.gz of tests/data/diff; resnet of tests/data/nsys/pyprof and tests/data/kineto).
NSYS_LERP = ("void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)2>, "
             "at::native::<unnamed>::TernaryOpScalarFunctor<c10::BFloat16, (int)2, (int)2, (int)0>, "
             "at::native::LerpFunctor<float>, float>(T1, T2, T3...)")
KINETO_LERP = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
               "TensorListMetadata<2>, at::native::(anonymous namespace)::TernaryOpScalarFunctor<c10::BFloat16, 2, "
               "2, 0>, at::native::LerpFunctor<float>, float>(at::native::(anonymous namespace)::"
               "TensorListMetadata<2>, "
               "at::native::(anonymous namespace)::TernaryOpScalarFunctor<c10::BFloat16, 2, 2, 0>, "
               "at::native::LerpFunctor<float>, float)")
NSYS_SQRT = ("void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)2>, "
             "at::native::<unnamed>::UnaryOpFunctor<c10::BFloat16, (int)2, (int)1, (int)1>, "
             "at::native::Sqrt<float>>(T1, T2, T3...)")
NSYS_GELU = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImpl("
             "at::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::"
             "[lambda() (instance 4)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], "
             "std::array<char *, (unsigned long)2>>(int, T2, T3)")
KINETO_GELU = ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl("
               "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
               "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::"
               "GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::"
               "{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)")
# nsys writes a function template's parameters by their template names (T1), the profiler by their types
NSYS_THRESHOLD = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::BinaryFunctor<c10::Half, "
                  "c10::Half, c10::Half, at::native::threshold_kernel_impl<c10::Half>(at::TensorIteratorBase &, "
                  "T1, T1)::"
                  "[lambda(c10::Half, c10::Half) (instance 1)]>, std::array<char *, (unsigned long)3>>(int, T2, T3)")
KINETO_THRESHOLD = ("void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::Half, c10::Half, "
                    "c10::Half, at::native::threshold_kernel_impl<c10::Half>(at::TensorIteratorBase&, c10::Half, "
                    "c10::Half)::{lambda(c10::Half, c10::Half)#1}>, std::array<char*, 3ul> >(int, at::native::"
                    "BinaryFunctor<c10::Half, c10::Half, c10::Half, at::native::threshold_kernel_impl<c10::Half>("
                    "at::TensorIteratorBase&, c10::Half, c10::Half)::{lambda(c10::Half, c10::Half)#1}>, "
                    "std::array<char*, 3ul>)")


@pytest.mark.parametrize("nsys,kineto,short", [
    (NSYS_LERP, KINETO_LERP, "multi_tensor_apply_kernel"),
    (NSYS_GELU, KINETO_GELU, "vectorized_elementwise_kernel"),
    (NSYS_THRESHOLD, KINETO_THRESHOLD, "vectorized_elementwise_kernel"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
     "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"),
])
def test_one_kernel_as_both_profilers_write_it(nsys, kineto, short):
    assert kernel_name(nsys, short) == kernel_name(kineto, short)


def test_kernels_sharing_a_short_name_stay_apart():
    # foreach AdamW's lerp and sqrt are both multi_tensor_apply_kernel, with different functors
    assert kernel_name(NSYS_LERP, "multi_tensor_apply_kernel") != kernel_name(NSYS_SQRT, "multi_tensor_apply_kernel")
    assert kernel_name(NSYS_LERP, "multi_tensor_apply_kernel") == (
        "multi_tensor_apply_kernel<TensorListMetadata<2>,TernaryOpScalarFunctor<BFloat16,2,2,0>,LerpFunctor<float>,"
        "float>")


def test_shapes_as_both_profilers_write_them():
    # cross_entropy's backward, its forward's inputs: pyprof lists the call's tensors, the profiler every argument
    # of aten::cross_entropy_loss (four non-tensors as [])
    assert shapes_name("[[[4088, 32000], [4088]]]"[1:-1]) == shapes_name("[[4088, 32000], [4088], [], [], [], []]")
    # F.embedding(input, weight) runs aten::embedding(weight, indices): the same tensors in another order
    assert shapes_name("[[8, 511], [32000, 1024], [], [], [], [], []]") == \
        shapes_name("[[32000, 1024], [8, 511], [], [], []]")
    # a tensor list: its shapes (pyprof) or [] (the profiler); neither takes part
    assert shapes_name("[[[1024], [3072, 1024]], []]") == shapes_name("[[], []]") == "[]"
    assert shapes_name("[[2, 3], [3, 4]]") != shapes_name("[[2, 3], [3, 5]]")
    assert shapes_name("not a list") == "not a list"


def test_lines_match_by_file_name_and_number():
    assert line_name("/work/main/examples/transformer.py:60") == line_name("/home/me/src/examples/transformer.py:60") \
        == "transformer.py:60"
    assert line_name("-") == "-"
