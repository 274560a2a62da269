"""Convolutions (1-d, 2-d, 3-d, grouped, transposed), counted as torch.utils.flop_counter counts them:

- forward: 2 · N · Cout · (Cin/groups) · prod(kernel) · prod(output spatial); transposed:
  2 · N · Cin · (Cout/groups) · prod(kernel) · prod(input spatial). Bias ignored in FLOPs, read once.
- bytes: the input elements some window reads (a 1×1 convolution of stride 2 reads a quarter of its input),
  the weight (and bias), the output; dgrad writes the whole input gradient.
- backward: dgrad (grad of the input) and wgrad (grad of the weight) each cost the forward's FLOPs.
  flop_counter counts a grouped convolution's wgrad ``groups`` times larger (it drops the 1/groups);
  we keep the arithmetic count, so depthwise wgrad differs from it (docs/formulas.md).
"""
from __future__ import annotations

from math import prod

from pyprof.prof.model.args import Args, estimate, short_dtype
from pyprof.prof.model.registry import Estimate, Family, NotModelled, register


def conv(x: tuple, w: tuple, dtype: str | None, *, stride: tuple, padding: tuple, dilation: tuple,
         groups: int, transposed: bool, output_padding: tuple, role: str, bias_numel: int = 0,
         out_spatial: tuple | None = None) -> Estimate:
    """Estimate for one convolution of input shape ``x`` [N, C, *spatial] and weight ``w``.

    ``out_spatial``: the output's spatial size when it is known from a tensor (a gradient's shape), which
    makes stride, padding and dilation unnecessary."""
    d = len(x) - 2
    if d < 1 or len(w) != len(x):
        raise NotModelled(f"conv shapes input {x}, weight {w}")
    n, cin, spatial = x[0], x[1], x[2:]
    kernel = w[2:]
    if transposed:  # weight [Cin, Cout/groups, *k]
        cout = w[1] * groups
        out = tuple((i - 1) * s - 2 * p + dl * (k - 1) + op + 1
                    for i, s, p, dl, k, op in zip(spatial, stride, padding, dilation, kernel, output_padding))
        flops = 2 * n * cin * (cout // groups) * prod(kernel) * prod(spatial)
    else:  # weight [Cout, Cin/groups, *k]
        cout = w[0]
        if w[1] * groups != cin:
            raise NotModelled(f"weight {w} does not match {cin} input channels in {groups} groups")
        out = tuple(out_spatial) if out_spatial is not None else tuple(
            int((i + 2 * p - dl * (k - 1) - 1) // s) + 1 for i, s, p, dl, k in zip(spatial, stride, padding, dilation, kernel))
        flops = 2 * n * cout * (cin // groups) * prod(kernel) * prod(out)
    if any(o <= 0 for o in out):
        raise NotModelled(f"empty output {out}")
    xn, wn, on = prod(x), prod(w), n * cout * prod(out)
    # The input a forward or wgrad kernel must read: only the positions some window covers (all of it when the
    # output size comes from a gradient's shape: the stride and padding were not recorded).
    xr = xn if transposed or out_spatial is not None else n * cin * prod(
        _covered(i, o, k, s, p, dl) for i, o, k, s, p, dl in zip(spatial, out, kernel, stride, padding, dilation))
    params = ("N={},C={},K={},".format(n, cin, cout) + "in=" + "x".join(map(str, spatial))
              + ",k=" + "x".join(map(str, kernel)) + ",out=" + "x".join(map(str, out))
              + (f",s={'x'.join(map(str, stride))}" if any(s != 1 for s in stride) else "")
              + (f",g={groups}" if groups != 1 else "") + (",T" if transposed else "") + f",{short_dtype(dtype)}")
    dims = (("C", cin), ("K", cout))  # the channels: the batch and spatial sizes need no alignment
    if role == "dgrad":
        return estimate(flops, [(on, dtype), (wn, dtype), (xn, dtype)], params + ",dgrad", dims)
    if role == "wgrad":
        return estimate(flops, [(xr, dtype), (on, dtype), (wn, dtype)], params + ",wgrad", dims)
    if role == "bprop":
        return estimate(2 * flops, [(on, dtype), (wn, dtype), (xn, dtype), (xr, dtype), (wn, dtype)],
                        params + ",bprop", dims)
    return estimate(flops, [(xr, dtype), (wn, dtype), (bias_numel, dtype), (on, dtype)], params, dims)


def _covered(size: int, out: int, k: int, stride: int, pad, dil: int) -> int:
    """How many of an input dimension's ``size`` positions the ``out`` windows of ``k`` taps read."""
    pad = int(pad)  # padding='same' gives a half for even kernels
    if dil == 1 and stride <= k:  # windows touch or overlap: one run of positions
        return max(0, min(size - 1, (out - 1) * stride - pad + k - 1) - max(0, -pad) + 1)
    if size > 65536:
        return size
    return len({x for o in range(out) for j in range(k) if 0 <= (x := o * stride - pad + j * dil) < size})


def _functional(a: Args, transposed: bool) -> Estimate:
    x, w = a.tensor(0, "input"), a.tensor(1, "weight")
    bias = a.tensor(2, "bias", optional=True)
    d = len(x.shape) - 2
    if d < 1:
        raise NotModelled(f"conv input shape {x.shape}")
    try:
        if transposed:  # conv_transposeNd(input, weight, bias, stride, padding, output_padding, groups, dilation)
            stride, padding = a.ints(3, "stride", d, 1), a.ints(4, "padding", d, 0)
            output_padding, groups = a.ints(5, "output_padding", d, 0), int(a.value(6, "groups", 1, required=True))
            dilation = a.ints(7, "dilation", d, 1)
        else:  # convNd(input, weight, bias, stride, padding, dilation, groups)
            stride, dilation = a.ints(3, "stride", d, 1), a.ints(5, "dilation", d, 1)
            groups, output_padding = int(a.value(6, "groups", 1, required=True)), (0,) * d
            pv = a.value(4, "padding", 0)
            padding = _same_padding(pv, w.shape[2:], dilation) if isinstance(pv, str) else a.ints(4, "padding", d, 0)
    except NotModelled:
        # emit_nvtx records no stride or padding; the output's shape, where parse found it (the out= entry),
        # gives a regular convolution's FLOPs with the channel counts (groups = Cin / weight's Cin).
        out = a.tensor(None, "out", optional=True)
        if out is None or transposed or len(out.shape) != len(x.shape) or x.shape[1] % w.shape[1]:
            raise
        return conv(x.shape, w.shape, x.dtype, stride=(1,) * d, padding=(0,) * d, dilation=(1,) * d,
                    groups=x.shape[1] // w.shape[1], transposed=False, output_padding=(0,) * d, role=a.role,
                    bias_numel=bias.numel if bias else 0, out_spatial=tuple(out.shape[2:]))
    return conv(x.shape, w.shape, x.dtype, stride=stride, padding=padding, dilation=dilation, groups=groups,
                transposed=transposed, output_padding=output_padding, role=a.role,
                bias_numel=bias.numel if bias else 0)


def _same_padding(mode: str, kernel: tuple, dilation: tuple) -> tuple:
    """padding='valid' is 0; 'same' keeps the size (stride 1), i.e. total padding dil·(k-1), split in two."""
    if mode == "valid":
        return (0,) * len(kernel)
    if mode == "same":  # the output size is what matters; total padding d·(k-1) gives out = in
        return tuple(dl * (k - 1) / 2 for k, dl in zip(kernel, dilation))
    raise NotModelled(f"padding={mode!r}")


@register("torch.nn.functional.conv1d", "torch.nn.functional.conv2d", "torch.nn.functional.conv3d",
          "torch.conv1d", "torch.conv2d", "torch.conv3d", "aten::conv1d", "aten::conv2d", "aten::conv3d",
          family=Family.CONV)
def conv_nd(a: Args) -> Estimate:
    """conv1d/2d/3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)."""
    return _functional(a, transposed=False)


@register("torch.nn.functional.conv_transpose1d", "torch.nn.functional.conv_transpose2d",
          "torch.nn.functional.conv_transpose3d", "torch.conv_transpose1d", "torch.conv_transpose2d",
          "torch.conv_transpose3d", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
          family=Family.CONV)
def conv_transpose_nd(a: Args) -> Estimate:
    """conv_transposeNd(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)."""
    return _functional(a, transposed=True)


@register("aten::convolution", "aten::_convolution", "torch.convolution", family=Family.CONV)
def convolution(a: Args) -> Estimate:
    """aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    x, w = a.tensor(0, "input"), a.tensor(1, "weight")
    bias = a.tensor(2, "bias", optional=True)
    d = len(x.shape) - 2
    if d < 1:
        raise NotModelled(f"conv input shape {x.shape}")
    return conv(x.shape, w.shape, x.dtype, stride=a.ints(3, "stride", d, 1), padding=a.ints(4, "padding", d, 0),
                dilation=a.ints(5, "dilation", d, 1), transposed=bool(a.value(6, "transposed", False)),
                output_padding=a.ints(7, "output_padding", d, 0), groups=int(a.value(8, "groups", 1)),
                role=a.role, bias_numel=bias.numel if bias else 0)


@register("aten::cudnn_convolution", family=Family.CONV)
def cudnn_convolution(a: Args) -> Estimate:
    """aten::cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic, tf32)."""
    return _backend(a, transposed=False, bias=False)


@register("aten::cudnn_convolution_transpose", family=Family.CONV)
def cudnn_convolution_transpose(a: Args) -> Estimate:
    """aten::cudnn_convolution_transpose(self, weight, padding, output_padding, stride, dilation, groups, ...)."""
    return _backend(a, transposed=True, bias=False)


@register("aten::miopen_convolution", "aten::mkldnn_convolution", family=Family.CONV)
def backend_convolution_with_bias(a: Args) -> Estimate:
    """aten::miopen_convolution / mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups, ...)."""
    return _backend(a, transposed=False, bias=True)


def _backend(a: Args, transposed: bool, bias: bool) -> Estimate:
    x, w = a.tensor(0), a.tensor(1)
    d = len(x.shape) - 2
    if d < 1:
        raise NotModelled(f"conv input shape {x.shape}")
    o = 1 if bias else 0
    b = a.tensor(2, optional=True) if bias else None
    padding = a.ints(2 + o, "padding", d, 0)
    if transposed:
        output_padding = a.ints(3, "output_padding", d, 0)
        stride, dilation, groups = a.ints(4, "stride", d, 1), a.ints(5, "dilation", d, 1), int(a.value(6, "groups", 1))
    else:
        output_padding = (0,) * d
        stride, dilation = a.ints(3 + o, "stride", d, 1), a.ints(4 + o, "dilation", d, 1)
        groups = int(a.value(5 + o, "groups", 1))
    return conv(x.shape, w.shape, x.dtype, stride=stride, padding=padding, dilation=dilation, groups=groups,
                transposed=transposed, output_padding=output_padding, role=a.role, bias_numel=b.numel if b else 0)


@register("aten::convolution_backward", backward=True, family=Family.CONV)
def convolution_backward(a: Args) -> Estimate:
    """aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): the gradients ``output_mask`` asks for (dgrad, wgrad; the bias
    gradient, a reduction, is not counted). A kernel given role dgrad when only wgrad is computed counts as
    wgrad (the first layer: its input needs no gradient)."""
    x, w = a.tensor(1, "input"), a.tensor(2, "weight")
    d = len(x.shape) - 2
    if d < 1:
        raise NotModelled(f"conv input shape {x.shape}")
    return _gradients(a, x, w, a.tensor(0, "grad_output", optional=True), a.value(10, "output_mask", None),
                      lambda r: conv(x.shape, w.shape, x.dtype, stride=a.ints(4, "stride", d, 1),
                                     padding=a.ints(5, "padding", d, 0), dilation=a.ints(6, "dilation", d, 1),
                                     transposed=bool(a.value(7, "transposed", False)),
                                     output_padding=a.ints(8, "output_padding", d, 0),
                                     groups=int(a.value(9, "groups", 1, required=True)), role=r))


@register("aten::cudnn_convolution_backward", backward=True, family=Family.CONV)
def cudnn_convolution_backward(a: Args) -> Estimate:
    """aten::cudnn_convolution_backward(self, grad_output, weight, padding, stride, dilation, groups, benchmark,
    deterministic[, allow_tf32], output_mask), PyTorch 1.x's cuDNN backward: as convolution_backward."""
    x, w = a.tensor(0, "self"), a.tensor(2, "weight")
    d = len(x.shape) - 2
    if d < 1:
        raise NotModelled(f"conv input shape {x.shape}")
    return _gradients(a, x, w, a.tensor(1, "grad_output", optional=True), a.value(None, "output_mask", None),
                      lambda r: conv(x.shape, w.shape, x.dtype, stride=a.ints(4, "stride", d, 1),
                                     padding=a.ints(3, "padding", d, 0), dilation=a.ints(5, "dilation", d, 1),
                                     transposed=False, output_padding=(0,) * d,
                                     groups=int(a.value(6, "groups", 1, required=True)), role=r))


def _gradients(a: Args, x, w, g, mask, one_role) -> Estimate:
    """The gradients of a backward convolution that ``mask`` asks for (both when not recorded), for the role a
    kernel was given: ``one_role(role)`` from the recorded stride and padding, else (emit_nvtx, PyTorch 1.x
    traces record none) from grad_output's shape, which is the output's: a regular convolution's FLOPs follow
    from it and the channel counts (groups = Cin / weight's Cin)."""
    d = len(x.shape) - 2
    mask = mask if isinstance(mask, (list, tuple)) and mask else [True, True, False]
    want_d, want_w = bool(mask[0]), bool(mask[1]) if len(mask) > 1 else True
    role = a.role
    if role == "dgrad" and not want_d:
        role = "wgrad"
    elif role == "wgrad" and not want_w:
        role = "dgrad"

    def one(r: str) -> Estimate:
        try:
            return one_role(r)
        except NotModelled:
            if g is None or len(g.shape) != len(x.shape) or x.shape[1] % w.shape[1]:
                raise
            return conv(x.shape, w.shape, x.dtype, stride=(1,) * d, padding=(0,) * d, dilation=(1,) * d,
                        transposed=False, output_padding=(0,) * d, groups=x.shape[1] // w.shape[1], role=r,
                        out_spatial=tuple(g.shape[2:]))

    if role in ("dgrad", "wgrad"):
        return one(role)
    parts = [one(r) for r, on in (("dgrad", want_d), ("wgrad", want_w)) if on]
    if not parts:
        raise NotModelled("output_mask asks for no input or weight gradient")
    flops = sum(p.flops for p in parts)
    nbytes = None if any(p.bytes is None for p in parts) else sum(p.bytes for p in parts)
    return Estimate(flops, nbytes, parts[0].params.rsplit(",", 1)[0] + ",bprop",
                    None if nbytes is not None else "dtype unknown: bytes not modelled", parts[0].tc_dims)
