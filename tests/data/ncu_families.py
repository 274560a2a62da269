"""Small cases of each kernel family PyTorch can launch on one GPU, for Nsight Compute's tensor-pipe counters
(tests/data/ncu_families.sh runs this under ncu; docs/tensor_cores.md, "Checking against the hardware").

Every case runs once outside the profiled range (library set-up, cuDNN's and Inductor's autotuning), then once
inside cudaProfilerStart/Stop within an NVTX range named after it, so that ncu's CSV says which case launched
which kernel. A case that this PyTorch or GPU does not support is reported and skipped.
"""
from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

DEV = "cuda"
CASES: dict = {}
T0 = time.time()
TRITON_DEADLINE_S = float(sys.argv[1]) if len(sys.argv) > 1 else 240.0  # no Triton case past this many seconds


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def rand(*shape, dtype=torch.bfloat16, grad=False):
    return torch.randn(*shape, device=DEV, dtype=dtype, requires_grad=grad)


def tf32(on: bool):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:  # PyTorch 2.9+ spells it fp32_precision; set both so that either reading agrees
        torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if on else "ieee"
    except AttributeError:
        pass


@case
def mm_bf16():
    tf32(False); return rand(1024, 1024) @ rand(1024, 1024)


@case
def mm_fp16():
    tf32(False); return rand(1024, 1024, dtype=torch.half) @ rand(1024, 1024, dtype=torch.half)


@case
def mm_fp32_tf32_off():
    tf32(False); return rand(1024, 1024, dtype=torch.float) @ rand(1024, 1024, dtype=torch.float)


@case
def mm_fp32_tf32_on():
    tf32(True); r = rand(1024, 1024, dtype=torch.float) @ rand(1024, 1024, dtype=torch.float); tf32(False); return r


@case
def mm_fp64():
    return rand(512, 512, dtype=torch.double) @ rand(512, 512, dtype=torch.double)


@case
def bmm_bf16():
    return torch.bmm(rand(8, 256, 512), rand(8, 512, 256))


@case
def linear_bias_bf16_fwd_bwd():
    x, w, b = rand(512, 1024, grad=True), rand(768, 1024, grad=True), rand(768, grad=True)
    F.linear(x, w, b).float().sum().backward()


@case
def gemv_bf16():
    return rand(4096, 4096) @ rand(4096)


@case
def int8_mm():
    a = torch.randint(-8, 8, (1024, 1024), device=DEV, dtype=torch.int8)
    b = torch.randint(-8, 8, (1024, 1024), device=DEV, dtype=torch.int8)
    return torch._int_mm(a, b)


def fp8(m, n):
    return rand(m, n).to(torch.float8_e4m3fn)


@case
def scaled_mm_fp8_tensorwise():  # cuBLASLt
    one = torch.ones((), device=DEV)
    return torch._scaled_mm(fp8(1024, 1024), fp8(1024, 1024).t(), one, one, out_dtype=torch.bfloat16)


@case
def scaled_mm_fp8_rowwise():  # CUTLASS (sm90 rowwise-scaled GEMM)
    return torch._scaled_mm(fp8(1024, 1024), fp8(1024, 1024).t(), torch.ones(1024, 1, device=DEV),
                            torch.ones(1, 1024, device=DEV), out_dtype=torch.bfloat16)


@case
def grouped_mm_bf16():  # CUTLASS grouped GEMM
    offs = torch.tensor([128, 256, 384, 512], device=DEV, dtype=torch.int32)
    return torch._grouped_mm(rand(512, 256), rand(4, 256, 384).transpose(-2, -1).contiguous().transpose(-2, -1),
                             offs=offs)


@case
def scaled_grouped_mm_fp8():
    offs = torch.tensor([128, 256, 384, 512], device=DEV, dtype=torch.int32)
    b = fp8(4 * 384, 256).view(4, 384, 256).transpose(-2, -1)
    return torch._scaled_grouped_mm(fp8(512, 256), b, torch.ones(512, device=DEV), torch.ones(4, 384, device=DEV),
                                    offs=offs, out_dtype=torch.bfloat16)


def conv(dtype, channels_last: bool, tf32_on: bool = False):
    tf32(tf32_on)
    x, w = rand(16, 64, 56, 56, dtype=dtype, grad=True), rand(128, 64, 3, 3, dtype=dtype, grad=True)
    if channels_last:
        x = x.detach().to(memory_format=torch.channels_last).requires_grad_()
        w = w.detach().to(memory_format=torch.channels_last).requires_grad_()
    F.conv2d(x, w, padding=1).float().sum().backward()
    tf32(False)


@case
def conv_fp16_channels_last_fwd_bwd():
    conv(torch.half, True)


@case
def conv_bf16_fwd_bwd():
    conv(torch.bfloat16, False)


@case
def conv_fp32_tf32_off_fwd_bwd():
    conv(torch.float, False)


@case
def conv_fp32_tf32_on_fwd_bwd():
    conv(torch.float, False, True)


def sdpa(backend, dtype=torch.bfloat16):
    from torch.nn.attention import sdpa_kernel
    q, k, v = (rand(2, 8, 512, 64, dtype=dtype, grad=True) for _ in range(3))
    with sdpa_kernel(backend):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).float().sum().backward()


@case
def sdpa_cudnn_fwd_bwd():
    from torch.nn.attention import SDPBackend
    sdpa(SDPBackend.CUDNN_ATTENTION)


@case
def sdpa_flash_fwd_bwd():
    from torch.nn.attention import SDPBackend
    sdpa(SDPBackend.FLASH_ATTENTION)


@case
def sdpa_efficient_bf16_fwd_bwd():
    from torch.nn.attention import SDPBackend
    sdpa(SDPBackend.EFFICIENT_ATTENTION)


@case
def sdpa_efficient_fp32_fwd_bwd():
    from torch.nn.attention import SDPBackend
    sdpa(SDPBackend.EFFICIENT_ATTENTION, torch.float)


_COMPILED: dict = {}


@case
def triton_template_mm_bf16():
    if time.time() - T0 > TRITON_DEADLINE_S:
        raise TimeoutError(f"skipped: {time.time() - T0:.0f} s gone, past {TRITON_DEADLINE_S} s")
    import torch._inductor.config as cfg
    cfg.max_autotune_gemm_backends = "TRITON"  # a Triton template, not cuBLAS, whatever times best
    f = _COMPILED.get("mm") or _COMPILED.setdefault(
        "mm", torch.compile(lambda a, b: torch.relu(a @ b), mode="max-autotune-no-cudagraphs"))
    return f(rand(512, 512), rand(512, 512))


@case
def triton_pointwise():
    f = _COMPILED.get("pw") or _COMPILED.setdefault("pw", torch.compile(lambda a: torch.sigmoid(a) * a + 1))
    return f(rand(1 << 20))


def main() -> None:
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
          torch.cuda.get_device_name(), flush=True)
    ok = {}
    for name, fn in CASES.items():  # warm-up, outside the profiled range
        t = time.time()
        try:
            fn(); torch.cuda.synchronize(); ok[name] = True
            print(f"warm {name}: ok ({time.time() - t:.1f} s)", flush=True)
        except Exception as e:  # one unsupported case must not stop the others
            ok[name] = False
            print(f"warm {name}: SKIPPED {type(e).__name__}: {str(e)[:200]}", flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in CASES.items():
        if not ok[name]:
            continue
        torch.cuda.nvtx.range_push(name)
        try:
            fn(); torch.cuda.synchronize()
            print(f"ran {name}", flush=True)
        except Exception as e:
            print(f"run {name}: FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
        torch.cuda.nvtx.range_pop()
    torch.cuda.cudart().cudaProfilerStop()
    print("ran:", " ".join(n for n, v in ok.items() if v))
    print("skipped:", " ".join(n for n, v in ok.items() if not v) or "none")


if __name__ == "__main__":
    main()
