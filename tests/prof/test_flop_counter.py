"""Cross-check against torch.utils.flop_counter.FlopCounterMode on CPU (an independent implementation).
Runs only where torch imports; prof itself never needs torch."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from pyprof.prof.model import registry  # noqa: E402
from pyprof.prof.model.args import Args  # noqa: E402

from .helpers import S, T  # noqa: E402


def counted(fn, *tensors) -> int:
    with FlopCounterMode(display=False) as m:
        fn(*tensors)
    return m.get_total_flops()


def ours(op: str, args, role: str = "fprop") -> int:
    return registry.get(op).fn(Args(args, role)).flops


def shape(t):
    return T(list(t.shape), str(t.dtype).replace("torch.", ""))


@pytest.mark.parametrize("x,w,b", [((64, 256), (512, 256), True), ((4, 16, 256), (128, 256), False)])
def test_linear_forward_and_backward(x, w, b):
    xt, wt = torch.randn(*x, requires_grad=True), torch.randn(*w, requires_grad=True)
    bt = torch.randn(w[0], requires_grad=True) if b else None
    args = [shape(xt), shape(wt)] + ([shape(bt)] if b else [])
    assert counted(torch.nn.functional.linear, xt, wt, bt) == ours("torch.nn.functional.linear", args)

    def fwd_bwd(xt, wt, bt):
        torch.nn.functional.linear(xt, wt, bt).sum().backward()

    total = counted(fwd_bwd, xt, wt, bt)
    assert total == sum(ours("torch.nn.functional.linear", args, r) for r in ("fprop", "dgrad", "wgrad"))


@pytest.mark.parametrize("x,w,kw", [
    ((2, 3, 32, 32), (16, 3, 3, 3), dict(stride=1, padding=1)),
    ((2, 16, 17, 17), (32, 16, 3, 3), dict(stride=2, padding=0)),
    ((1, 8, 10), (4, 8, 5), dict(stride=1, padding=2)),
    ((1, 4, 6, 6, 6), (8, 4, 3, 3, 3), dict(stride=1, padding=1)),
    ((2, 8, 9, 9), (8, 2, 3, 3), dict(stride=1, padding=1, groups=4)),  # grouped: forward and dgrad agree
])
def test_conv_forward_and_backward(x, w, kw):
    d = len(x) - 2
    conv = getattr(torch.nn.functional, f"conv{d}d")
    xt, wt = torch.randn(*x, requires_grad=True), torch.randn(*w, requires_grad=True)
    args = [shape(xt), shape(wt), S(None), S(kw["stride"], "stride"), S(kw["padding"], "padding")]
    if "groups" in kw:
        args.append(S(kw["groups"], "groups"))
    op = f"torch.nn.functional.conv{d}d"
    assert counted(lambda a, b: conv(a, b, **kw), xt, wt) == ours(op, args)

    def fwd_bwd(a, b):
        conv(a, b, **kw).sum().backward()

    total = counted(fwd_bwd, xt, wt)
    g = kw.get("groups", 1)
    # flop_counter drops the 1/groups of a grouped conv's weight gradient (docs/formulas.md): it counts wgrad g×.
    expected = ours(op, args) + ours(op, args, "dgrad") + g * ours(op, args, "wgrad")
    assert total == expected


def test_conv_transpose():
    xt, wt = torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3)
    kw = dict(stride=2, padding=1, output_padding=1)
    args = [shape(xt), shape(wt), S(None), S(2, "stride"), S(1, "padding"), S(1, "output_padding")]
    assert counted(lambda a, b: torch.nn.functional.conv_transpose2d(a, b, **kw), xt, wt) == \
        ours("torch.nn.functional.conv_transpose2d", args)


def test_bmm_baddbmm_matmul():
    a, b, c = torch.randn(4, 8, 16), torch.randn(4, 16, 32), torch.randn(4, 8, 32)
    assert counted(torch.bmm, a, b) == ours("torch.bmm", [shape(a), shape(b)])
    assert counted(torch.baddbmm, c, a, b) == ours("torch.baddbmm", [shape(c), shape(a), shape(b)])
    x, y = torch.randn(3, 5, 8, 16), torch.randn(16, 4)
    assert counted(torch.matmul, x, y) == ours("torch.matmul", [shape(x), shape(y)])


def test_sdpa_matches_its_bmms():
    """On CPU the math path runs; its two bmms are what flop_counter sees, and they equal the sdpa formula."""
    q = torch.randn(2, 4, 32, 16, requires_grad=True)
    k = torch.randn(2, 4, 48, 16, requires_grad=True)
    v = torch.randn(2, 4, 48, 16, requires_grad=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        fwd = counted(torch.nn.functional.scaled_dot_product_attention, q, k, v)
    args = [shape(q), shape(k), shape(v)]
    assert fwd == ours("torch.nn.functional.scaled_dot_product_attention", args)


def test_sdpa_backward_formula_matches_flop_counter_function():
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    qs, ks, vs = (2, 8, 128, 64), (2, 8, 256, 64), (2, 8, 256, 64)
    args = [T(qs, "bfloat16"), T(ks, "bfloat16"), T(vs, "bfloat16")]
    assert ours("aten::_scaled_dot_product_flash_attention", args) == sdpa_flop_count(qs, ks, vs)
    assert ours("aten::_scaled_dot_product_flash_attention", args, "bprop") == \
        sdpa_backward_flop_count(qs, qs, ks, vs)
