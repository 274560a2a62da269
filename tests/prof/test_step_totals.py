"""A training step's GEMM/conv/attention FLOPs, summed over records built from the aten ops PyTorch actually
runs (captured on CPU with a dispatch mode), equal torch.utils.flop_counter's total for the same step."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from pyprof.prof.model.modeller import Modeller  # noqa: E402
from pyprof.prof.model.registry import COUNTED_FAMILIES  # noqa: E402


def _entry(v):
    if isinstance(v, torch.Tensor):
        return {"type": "tensor", "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, torch.Tensor) for x in v):
        return {"type": "tensorlist", "items": [_entry(x) for x in v]}
    if v is None:
        return {"type": "none", "value": None}
    if isinstance(v, bool):
        return {"type": "bool", "value": v}
    if isinstance(v, (int, float)):
        return {"type": type(v).__name__, "value": v}
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, bool)) for x in v):
        return {"type": "tuple", "value": list(v)}
    return {"type": type(v).__name__}


class Capture(TorchDispatchMode):
    """Records as parse makes them from a PyTorch trace (op name, arguments), with the kernels a GPU would
    run: one per op call, except convolution_backward, which runs one kernel per gradient it computes
    (cuDNN-like names when ``named``, else anonymous GEMM kernels in autograd's order) and a bias reduction."""

    def __init__(self, named: bool = True):
        super().__init__()
        self.records = []
        self.named = named

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entries = [_entry(a) for a in args] + [dict(_entry(v), name=k) for k, v in kwargs.items()]
        n = len(self.records)
        name = func._schema.name
        kernels = ["k"]
        if name == "aten::convolution_backward":
            mask = args[10]
            kernels = [k for k, on in zip(("sm80_xmma_dgrad_implicit_gemm", "sm80_xmma_wgrad_implicit_gemm",
                                           "void at::native::reduce_kernel<512, 1>"), mask) if on]
            if not self.named:
                kernels = ["sm80_xmma_gemm_f32f32_kernel" if "grad" in k else k for k in kernels]
        for sub, k in enumerate(kernels):
            self.records.append({"kShortName": k, "kDuration": 1, "tid": 1, "dir": "fprop", "subSeqId": sub,
                                 "seqId": [n], "mod": ["aten"], "op": [name], "args": entries})
        return func(*args, **kwargs)


def _compare(model, inputs, named=True):
    def step():
        model.zero_grad()
        model(*inputs).float().pow(2).mean().backward()

    step()  # warm-up: lazy initialisations out of the way
    with FlopCounterMode(display=False) as fc:
        step()
    cap = Capture(named)
    with cap:
        step()
    m = Modeller()
    ours = 0
    for r in cap.records:
        res = m.model(r)
        if res.flops and res.family in COUNTED_FAMILIES:
            ours += res.flops
    assert fc.get_total_flops() > 0
    assert abs(ours - fc.get_total_flops()) <= 0.03 * fc.get_total_flops(), (ours, fc.get_total_flops())
    return ours, fc.get_total_flops()


@pytest.mark.parametrize("named", [True, False])
def test_resnet_block_step(named):
    torch.manual_seed(0)
    block = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
        torch.nn.Conv2d(16, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
    ours, theirs = _compare(block, (torch.randn(2, 3, 32, 32),), named)
    assert ours == theirs


def test_transformer_layer_step():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True,
                                             dropout=0.0)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):  # the CPU fused kernel has no flop_counter formula; its bmms do
        ours, theirs = _compare(layer, (torch.randn(2, 16, 64),))
    assert ours == theirs
