"""Every torch.nn.functional function and torch's common ops, in fp32, fp16 and bf16: the same results with
and without init(), and a marker that names the right op with the right shapes, dtypes and call site.

Inputs come from PyTorch's own OpInfo database (the sample inputs its test suite uses), so the cases were
not chosen by us; the F functions OpInfo has no entry for get a hand-written input in EXTRA_F below.
"""
from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F

import pyprof
from pyprof.nvtx import RecordingSink, patch

op_db = pytest.importorskip("torch.testing._internal.common_methods_invocations").op_db

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
NAMESPACES = {"nn.functional.": (F, "torch.nn.functional"), "linalg.": (torch.linalg, "torch.linalg"),
              "fft.": (torch.fft, "torch.fft"), "special.": (torch.special, "torch.special"), "": (torch, "torch")}
HERE = __file__


def _resolve(name: str):
    for prefix, (owner, mod) in NAMESPACES.items():
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            attr = name[len(prefix):]
            if callable(getattr(owner, attr, None)):
                return owner, attr, mod
            return None
    return None


PATCHED = {(owner, name) for owner, name, _ in patch.targets()}


def _cases():
    seen = set()
    for info in op_db:
        resolved = _resolve(info.name)
        if resolved is None or (resolved[0], resolved[1]) not in PATCHED:
            continue
        if not info.supported_dtypes("cpu"):  # a CUDA-only variant (batch_norm.without_cudnn)
            continue
        key = (info.name, info.variant_test_name)
        if key in seen:
            continue
        seen.add(key)
        yield pytest.param(info, resolved, id=f"{info.name}.{info.variant_test_name}".rstrip("."))


CASES = list(_cases())


def _flat_tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for e in x:
            yield from _flat_tensors(e)


def _call(fn, args, kwargs):
    """Run ``fn`` on a private copy of the arguments with a fixed seed; return (result or exception)."""
    args, kwargs = copy.deepcopy((args, kwargs))
    torch.manual_seed(1234)
    try:
        return fn(*args, **kwargs), None  # tag:call-site
    except Exception as e:  # the same exception must come out with and without pyprof
        return None, e


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        if a.layout != torch.strided:
            return torch.equal(a.to_dense(), b.to_dense())
        if a.is_complex():
            a, b = (torch.view_as_real(t.resolve_conj().to(torch.complex64)) for t in (a, b))
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
            torch.nan_to_num(a.detach()), torch.nan_to_num(b.detach())) and torch.equal(a.isnan(), b.isnan())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return True  # objects with no equality (generators, handles): the type check above is what we have


CALL_LINE = next(i for i, t in enumerate(open(HERE), 1) if "tag:call-site" in t and "next(" not in t)


def _check_one(owner, name, mod, args, kwargs):
    fn_name = name
    bare, bare_err = _call(getattr(owner, fn_name), args, kwargs)
    control, _ = _call(getattr(owner, fn_name), args, kwargs)
    sink = RecordingSink()
    pyprof.init(sink=sink)
    try:
        wrapped, wrapped_err = _call(getattr(owner, fn_name), args, kwargs)
    finally:
        pyprof.uninit()
    if bare_err is not None or wrapped_err is not None:
        assert type(bare_err) is type(wrapped_err) and str(bare_err) == str(wrapped_err)
    elif not name.startswith(("empty", "new_empty")) and _same(bare, control):
        # Uninitialised memory (empty*) and ops nondeterministic even with a seed get the marker check only.
        assert _same(bare, wrapped), f"{mod}.{name} gave another result under pyprof.init()"
    pushes = [json.loads(e[1]) for e in sink.events if e[0] == "push" and e[1].startswith("{")]
    mine = [p for p in pushes if p.get("op") == name and p.get("mod") == mod]
    assert mine, f"no marker for {mod}.{name}"
    marker = mine[0]
    assert marker["site"] == f"{HERE}:{CALL_LINE}"
    expected = [(list(t.shape), str(t.dtype).split(".")[1]) for t in _flat_tensors(list(args) + list(kwargs.values()))]
    seen = []
    for entry in marker["args"]:
        items = entry["items"] if entry["type"] == "tensorlist" else [entry] if entry["type"] == "tensor" else []
        seen += [(i["shape"], i["dtype"]) for i in items]
    assert seen == expected


@pytest.mark.parametrize("info,resolved", CASES)
def test_op_identical_and_marked(info, resolved):
    owner, name, mod = resolved
    ran = 0
    for dtype in DTYPES:
        if dtype not in info.supported_dtypes("cpu"):
            continue
        for sample in list(info.sample_inputs("cpu", dtype, requires_grad=False))[:1]:
            _check_one(owner, name, mod, (sample.input, *sample.args), dict(sample.kwargs))
            ran += 1
    if ran == 0:  # no float dtype on CPU: the op still has to pass with whatever dtype it supports
        dtype = sorted(info.supported_dtypes("cpu"), key=str)[0]
        sample = next(iter(info.sample_inputs("cpu", dtype, requires_grad=False)))
        _check_one(owner, name, mod, (sample.input, *sample.args), dict(sample.kwargs))


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


# F functions with no OpInfo of their own; inputs written here, each exercising the function's main path.
EXTRA_F = {
    "adaptive_max_pool1d_with_indices": lambda d: ((_x(2, 3, 8, dtype=d), 4), {}),
    "adaptive_max_pool2d_with_indices": lambda d: ((_x(2, 3, 8, 8, dtype=d), 4), {}),
    "adaptive_max_pool3d_with_indices": lambda d: ((_x(1, 2, 4, 4, 4, dtype=d), 2), {}),
    "affine_grid": lambda d: ((_x(2, 2, 3, dtype=d), [2, 3, 4, 4]), {"align_corners": False}),
    "celu_": lambda d: ((_x(4, 4, dtype=d),), {}),
    "conv_tbc": lambda d: ((_x(5, 2, 3, dtype=d), _x(3, 3, 4, dtype=d), _x(4, dtype=d)), {}),
    "dropout1d": lambda d: ((_x(2, 3, 8, dtype=d),), {"p": 0.5}),
    "elu_": lambda d: ((_x(4, 4, dtype=d),), {}),
    "fold": lambda d: ((_x(1, 12, 9, dtype=d), (4, 4), (2, 2)), {}),
    "fractional_max_pool2d_with_indices": lambda d: ((_x(1, 2, 8, 8, dtype=d), 2), {"output_size": (4, 4)}),
    "fractional_max_pool3d_with_indices": lambda d: ((_x(1, 2, 6, 6, 6, dtype=d), 2), {"output_size": (3, 3, 3)}),
    "grouped_mm": lambda d: ((_x(4, 8, 16, dtype=d), _x(4, 16, 8, dtype=d)), {}),
    "gumbel_softmax": lambda d: ((_x(3, 5, dtype=d),), {"tau": 0.5}),
    "hardtanh_": lambda d: ((_x(4, 4, dtype=d),), {}),
    "leaky_relu_": lambda d: ((_x(4, 4, dtype=d),), {}),
    "log_softmax": lambda d: ((_x(3, 5, dtype=d),), {"dim": -1}),
    "lp_pool1d": lambda d: ((_x(2, 3, 8, dtype=d), 2.0, 2), {}),
    "lp_pool2d": lambda d: ((_x(2, 3, 8, 8, dtype=d), 2.0, 2), {}),
    "lp_pool3d": lambda d: ((_x(1, 2, 4, 4, 4, dtype=d), 2.0, 2), {}),
    "max_pool1d_with_indices": lambda d: ((_x(2, 3, 8, dtype=d), 2), {}),
    "max_pool2d_with_indices": lambda d: ((_x(2, 3, 8, 8, dtype=d), 2), {}),
    "max_pool3d_with_indices": lambda d: ((_x(1, 2, 4, 4, 4, dtype=d), 2), {}),
    "native_channel_shuffle": lambda d: ((_x(1, 4, 3, 3, dtype=d), 2), {}),
    "relu_": lambda d: ((_x(4, 4, dtype=d),), {}),
    "rrelu_": lambda d: ((_x(4, 4, dtype=d),), {"training": True}),
    "scaled_grouped_mm": lambda d: ((_x(4, 8, 16, dtype=d), _x(4, 16, 8, dtype=d), _x(4, 8), _x(4, 8)), {}),
    "scaled_mm": lambda d: ((_x(16, 16, dtype=d), _x(16, 16, dtype=d), _x(1), _x(1)), {}),
    "selu_": lambda d: ((_x(4, 4, dtype=d),), {}),
    "sigmoid": lambda d: ((_x(4, 4, dtype=d),), {}),
    "softmax": lambda d: ((_x(3, 5, dtype=d),), {"dim": 1}),
    "tanh": lambda d: ((_x(4, 4, dtype=d),), {}),
    "threshold_": lambda d: ((_x(4, 4, dtype=d), 0.1, 0.0), {}),
    "upsample": lambda d: ((_x(1, 2, 4, 4, dtype=d),), {"scale_factor": 2}),
}


@pytest.mark.parametrize("name", sorted(EXTRA_F))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_extra_functional_identical_and_marked(name, dtype):
    args, kwargs = EXTRA_F[name](dtype)
    _check_one(F, name, "torch.nn.functional", args, kwargs)


def test_every_functional_function_is_covered():
    patched = {name for owner, name, _ in patch.targets() if owner is F}
    by_opinfo = {p.values[1][1] for p in CASES if p.values[1][0] is F}
    missing = patched - by_opinfo - set(EXTRA_F)
    assert not missing, f"F functions with no test input: {sorted(missing)}"


def test_enough_ops_covered():
    # A guard against a silent shrink of the case list (an OpInfo rename, a resolution bug).
    assert len(CASES) > 400
