"""The recommendations' rules about the GPU's own work: Tensor Core use, distance from the roofline, memory
bandwidth, layout conversions, occupancy. Each checks the evidence it rests on (dtype, shapes, the GPU's peaks
and features) before it speaks; lacking it, it says once what it cannot judge and why (Ctx.cannot)."""
from __future__ import annotations

from pyprof.prof.model.args import dtype_info
from pyprof.prof.model.gpu_features import feature_for
from pyprof.prof.table.groups import Group
from pyprof.prof.views.helpers import merged
from pyprof.prof.views.findings import (FAR_ROOFLINE, HOTSPOT_SHARE, LAYOUT_SHARE, LOW_OCC_SHARE, LOW_OCCUPANCY,
                                        MEM_FAR, MEM_SHARE, MODELLED_SHARE, NEAR_ROOFLINE, NO_SHAPES,
                                        TC_FP32_SHARE, Ctx, Finding, at_target, cap_rows, fmt_ms, groups_over,
                                        misaligned, share, top)

_SHORT = {"fp16_tc": "fp16", "bf16_tc": "bf16", "fp8_tc": "fp8", "int8_tc": "int8", "fp64_tc": "fp64",
          "tf32_tc": "TF32"}


def _saving_basis(c: Ctx, rule: str, what: str, feature: str, g: Group) -> bool:
    """Whether the Tensor Core saving of ``g`` can be worked out: the GPU has a peak for ``feature`` and the
    kernels' FLOPs/bytes are modelled (else a note, and no finding: a saving would be a guess)."""
    if feature not in c.peaks.tflops:
        c.cannot(rule, f"the saving of {what}", f"the peaks table has no {_SHORT[feature]} Tensor Core peak for "
                 f"{c.peaks.name}")
        return False
    if g.ideal_ns <= 0 or not g.roof_ns:
        c.cannot(rule, f"the saving of {what}", "their FLOPs/bytes are not modelled (see the coverage line)")
        return False
    return True


def tensor_cores(c: Ctx) -> list[Finding]:
    """fp16/bf16 (and fp8/int8) matrix kernels that could have run on the GPU's Tensor Cores and did not."""
    miss: dict = {}
    no_dtype = Group()
    for (op, kernel, params, line, dims, dtype), group in merged(c.ws, "tc_miss").items():
        feature = feature_for(dtype)
        if feature == "tf32_tc":
            continue  # fp32: the fp32_matmul rule's
        if feature is None:
            if dtype_info(dtype) is None:  # not recorded; a recorded one no Tensor Core takes (int64): nothing to say
                no_dtype.merge(group)
            continue
        g, knames, lnames, _, _ = miss.setdefault((op, params), (Group(), set(), set(), dims, feature))
        g.merge(group)
        knames.add(kernel)
        lnames.add(line)
    if no_dtype.ns:
        c.cannot("tensor_cores", f"Tensor Core use of {no_dtype.count} GEMM/convolution kernels "
                 f"({fmt_ms(no_dtype.ns)})", NO_SHAPES)
    if miss and c.cap is None:
        c.cannot("tensor_cores", "which formats the GPU's Tensor Cores take", c.gpu_reason)
        return []
    out = []
    for (op, params), (g, knames, lnames, dims, feature) in miss.items():
        what = f"{op} ({params})"
        if not c.cap.has(feature):
            c.cannot("tensor_cores", f"Tensor Core use of {_SHORT[feature]} kernels",
                     f"{c.cap.label} has no {_SHORT[feature]} Tensor Cores")
            continue
        if not _saving_basis(c, "tensor_cores", what, feature, g):
            continue
        bad = misaligned(dims)
        why = (f"dimensions not multiples of 8: {', '.join(bad)}" if bad else
               "dimensions are multiples of 8" if dims else "the formula names no dimensions to pad")
        at = sorted(c.line(x) for x in lnames)
        out.append(Finding(
            "tensor_cores", f"{op} at {top(at)}; kernels {top(sorted(knames))}",
            f"{g.count} kernels ({params}) ran without Tensor Cores on {c.cap.label}, {fmt_ms(g.ns)} "
            f"({share(g.ns, c.gpu_ns)} of GPU time); {why}; {fmt_ms(g.ideal_ns)} at the "
            f"{_SHORT[feature]} Tensor Core roofline",
            at_target(g.roof_ns, g.ideal_ns),
            "Pad the named dimensions to multiples of 8 (16 for fp8/int8): vocabulary, hidden size, channels"
            if bad else "Check the layout (channels-last for convolutions) and the library's choice of kernel",
            g.ns))
    return cap_rows(out)


def fp32_matmul(c: Ctx) -> list[Finding]:
    """fp32 GEMMs/convolutions on CUDA cores (TF32 off) on a GPU whose Tensor Cores take TF32."""
    g, ops, lnames, knames = Group(), {}, set(), set()
    for (op, kernel, _params, line, _dims, dtype), group in merged(c.ws, "tc_miss").items():
        if feature_for(dtype) != "tf32_tc":
            continue
        g.merge(group)
        ops[op] = ops.get(op, 0) + group.ns
        lnames.add(line)
        knames.add(kernel)
    if not g.ns or 100.0 * g.ns / c.gpu_ns < TC_FP32_SHARE:
        return []
    what = f"{g.count} fp32 matrix kernels ({fmt_ms(g.ns)})"
    if c.cap is None:
        c.cannot("fp32_matmul", f"TF32 for {what}", c.gpu_reason)
        return []
    if not c.cap.has("tf32_tc"):
        half = [f for f in ("bf16_tc", "fp16_tc") if c.cap.has(f)]
        c.cannot("fp32_matmul", f"TF32 for {what}", f"{c.cap.label} has no TF32 Tensor Cores" +
                 (f" (its Tensor Cores take {_SHORT[half[0]]}: autocast to it is the way on)" if half else ""))
        return []
    if not _saving_basis(c, "fp32_matmul", what, "tf32_tc", g):
        return []
    action = "torch.set_float32_matmul_precision('high') (TF32 matmuls)"
    if c.cap.has("bf16_tc"):
        action += ", or bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)) for lower precision throughout"
    top_ops = [k for k, _ in sorted(ops.items(), key=lambda kv: -kv[1])]
    return [Finding(
        "fp32_matmul", f"ops {top(top_ops)} at {top(sorted(c.line(x) for x in lnames))}; kernels "
        f"{top(sorted(knames))}",
        f"{g.count} fp32 matrix kernels ran on CUDA cores (TF32 off) on {c.cap.label}, {fmt_ms(g.ns)} "
        f"({share(g.ns, c.gpu_ns)} of GPU time); {fmt_ms(g.ideal_ns)} at the TF32 Tensor Core roofline",
        at_target(g.roof_ns, g.ideal_ns), action, g.ns)]


def channels_last(c: Ctx) -> list[Finding]:
    """Convolutions paying for NCHW <-> NHWC conversions: the conversions are the price of Tensor Core
    convolution kernels (which take NHWC) on NCHW tensors, so the rule needs a GPU with Tensor Cores."""
    found = groups_over(c, "layout", LAYOUT_SHARE)
    if found is None:
        return []
    conv, ns, n = found
    if c.cap is None:
        c.cannot("channels_last", f"{n} layout conversion kernels ({fmt_ms(ns)})", c.gpu_reason)
        return []
    ops = sorted({op for op, _k, _l in conv}, key=str)
    kernels = sorted({k for _o, k, _l in conv})
    lines = sorted({c.line(line) for _o, _k, line in conv})
    convs = merged(c.ws, "convs")
    nchw_half = sum(g.ns for (layout, dtype), g in convs.items()
                    if layout == "nchw" and feature_for(dtype) in ("fp16_tc", "bf16_tc"))
    no_dtype = sum(g.ns for (_layout, dtype), g in convs.items() if dtype_info(dtype) is None)
    return [Finding(
        "channels_last", f"ops {top(ops)} at {top(lines)}; kernels {top(kernels)}",
        f"{n} layout conversion kernels (NCHW <-> NHWC), {fmt_ms(ns)} ({share(ns, c.gpu_ns)} of GPU time); "
        f"fp16/bf16 convolution kernels in NCHW: {fmt_ms(nchw_half)}" +
        (f" (dtype not recorded for {fmt_ms(no_dtype)} of convolution kernels)" if no_dtype else ""),
        float(ns),  # the conversions go: their whole time
        "model.to(memory_format=torch.channels_last) and the inputs too (x.to(memory_format=torch.channels_last)): "
        "Tensor Core convolutions take NHWC, so the conversions go",
        ns)]


def hotspots(c: Ctx) -> list[Finding]:
    """Lines (kernels when lines with a call site cover under half the time) far from their roofline, and one
    summary row for those near it. A hotspot whose FLOPs/bytes are modelled for under MODELLED_SHARE % of its
    time is not judged; the saving counts only its modelled time."""
    if c.gpu_ns <= 0:  # activities of no duration (fuzz case 4295 of seed 20261205): no share of GPU time
        return []
    lines = {k: g for k, g in merged(c.ws, "lines").items() if k != "-"}
    by_line = bool(lines) and sum(g.ns for g in lines.values()) >= 0.5 * c.gpu_ns
    spots = lines if by_line else merged(c.ws, "kernels")
    mem_ns: dict = {}
    for (kernel, _op, line, _matrix), g in merged(c.ws, "mem_bound").items():
        k = line if by_line else kernel
        mem_ns[k] = mem_ns.get(k, 0) + g.ns
    ops: dict = {}
    opt_ns: dict = {}  # a line's optimizer time: the optimizer rule speaks for it, "near the roofline" would not
    opt = merged(c.ws, "optimizer")
    if by_line:
        for (line, op), g in merged(c.ws, "line_ops").items():
            ops.setdefault(line, []).append((g.ns, op))
            if op in opt:
                opt_ns[line] = opt_ns.get(line, 0) + g.ns
    out, near, unjudged = [], [], Group()
    for k, g in spots.items():
        if 100.0 * g.ns / c.gpu_ns < HOTSPOT_SHARE or opt_ns.get(k, 0) >= 0.5 * g.ns:
            continue
        roof = g.roofline_pct
        if roof is None or 100.0 * g.roof_ns / g.ns < MODELLED_SHARE:
            unjudged.merge(g)
            continue
        label = f"line {c.line(k, text=True)}" if by_line else f"kernel {k}"
        if roof >= NEAR_ROOFLINE:
            near.append((g.ns, label, roof))
            continue
        if roof >= FAR_ROOFLINE:
            continue
        bound = "memory-bound" if mem_ns.get(k, 0) >= 0.5 * g.roof_ns else "compute-bound"
        tops = [op for _, op in sorted(ops.get(k, []), reverse=True)]
        what = f"; ops {top(tops)}" if tops else ""
        part = "" if g.roof_ns >= 0.99 * g.ns else f"; FLOPs/bytes modelled for {share(g.roof_ns, g.ns)} of it"
        out.append(Finding(
            "far_from_roofline", label + what,
            f"{fmt_ms(g.ns)} ({share(g.ns, c.gpu_ns)} of GPU time) at {roof:.1f}% of its roofline, mostly {bound}; " +
            ("no Tensor Core kernels in it" if g.tc_pct is None else f"Tensor Cores {g.tc_pct:.0f}% of its time") +
            part,
            at_target(g.roof_ns, g.ideal_ns),
            ("Memory-bound: fuse its element-wise ops (torch.compile), avoid copies (.contiguous, casts), use "
             "lower precision" if bound == "memory-bound" else
             "Compute-bound: check dtype and Tensor Core use (kernels view), shapes (multiples of 8, larger "
             "batches) and the kernels' occupancy"),
            g.ns))
    if unjudged.ns:
        reason = c.gpu_reason if c.peaks is None else (
            f"FLOPs/bytes are modelled for under {MODELLED_SHARE:.0f}% of their time (see the coverage line)")
        c.cannot("far_from_roofline", f"the roofline distance of hotspots holding {fmt_ms(unjudged.ns)}",
                 reason)
    if near:
        near.sort(reverse=True)
        ns = sum(x[0] for x in near)
        out.append(Finding(
            "near_roofline", top([x[1] for x in near]),
            ", ".join(f"{x[1].split(' ', 2)[1]} at {x[2]:.0f}%" for x in near[:3]) +
            f" of the roofline: {share(ns, c.gpu_ns)} of GPU time already close to what the GPU can do",
            0.0, "Not worth tuning: only doing less of this work helps (fuse, skip, lower precision)", ns))
    return out


#: A matrix kernel (GEMM, convolution, attention) set by its bytes: its shapes give too few FLOPs per byte read,
#: which fusing element-wise ops does not change.
MATRIX_BOUND_BY_BYTES = ("A matrix multiply bound by the bytes it reads: a small dimension gives it few FLOPs per byte "
                         "(few rows per launch, as a small batch or decoding one token has; a short inner dimension, "
                         "as an attention head's). More rows per launch (batch requests, one GEMM for projections "
                         "that share an input), fused attention (scaled_dot_product_attention) for a "
                         "matmul-softmax-matmul chain, or weights in fewer bytes (fp8, int8)")


def memory_bound(c: Ctx) -> list[Finding]:
    """Memory-bound kernels far below the peak bandwidth (the aggregate files a kernel here only when its
    bytes and the GPU's bandwidth are known)."""
    by_kernel: dict = {}
    matrix: set = set()  # kernels of a GEMM, convolution or attention: their bytes come from their shapes
    for (kernel, op, line, is_matrix), g in merged(c.ws, "mem_bound").items():
        kg, ops, lines = by_kernel.setdefault(kernel, (Group(), {}, {}))
        if is_matrix:
            matrix.add(kernel)
        kg.merge(g)
        ops[op] = ops.get(op, 0) + g.ns
        lines[line] = lines.get(line, 0) + g.ns
    out = []
    for kernel, (g, ops, lines) in by_kernel.items():
        if 100.0 * g.ns / c.gpu_ns < MEM_SHARE or g.roofline_pct is None or g.roofline_pct >= MEM_FAR:
            continue
        top_ops = [k for k, _ in sorted(ops.items(), key=lambda kv: -kv[1])]
        top_lines = [c.line(k) for k, _ in sorted(lines.items(), key=lambda kv: -kv[1])]
        out.append(Finding(
            "memory_bound", f"kernel {kernel} (ops {top(top_ops)} at {top(top_lines)})",
            f"{g.count} memory-bound kernels, {fmt_ms(g.ns)} ({share(g.ns, c.gpu_ns)} of GPU time) at "
            f"{g.roofline_pct:.1f}% of the peak bandwidth",
            at_target(g.roof_ns, g.ideal_ns), MATRIX_BOUND_BY_BYTES if kernel in matrix else
            "Small or strided accesses: fuse the element-wise chain (torch.compile), make inputs contiguous, "
            "larger tensors per launch (foreach ops, larger batches)",
            g.ns))
    if c.peaks is None and c.kernel_ns:
        c.cannot("memory_bound", "which kernels are memory-bound", c.gpu_reason)
    return cap_rows(out)


def low_occupancy(c: Ctx) -> list[Finding]:
    """Kernels (not on Tensor Cores) with low estimated occupancy. The saving counts the kernels whose roofline
    is known; with none, it is not estimated (na)."""
    # Tensor Core GEMM/conv kernels are built to run one large block per SM (their latency is hidden by
    # asynchronous copies, not by warps): low occupancy is their design, not a problem. Left out, as are the
    # communication kernels (NCCL's, DeepEP's: groups.is_comm), which run a few blocks per channel by design.
    kernels = merged(c.ws, "kernels")
    if c.kernel_ns and not any(g.occ_ns for g in kernels.values()):
        c.cannot("low_occupancy", "occupancy", "no launch configuration with the GPU's limits, nor the "
                 "profiler's own estimate, is recorded")
        return []
    low = [(k, g, 100.0 * g.occ_x_ns / g.occ_ns) for k, g in kernels.items()
           if g.occ_ns and not g.tc_ns and not g.comm_ns and 100.0 * g.occ_x_ns / g.occ_ns < LOW_OCCUPANCY]
    low_ns = sum(g.ns for _, g, _ in low)
    if not c.kernel_ns or 100.0 * low_ns / c.kernel_ns < LOW_OCC_SHARE:
        return []
    low.sort(key=lambda x: -x[1].ns)
    roofed = [g for _, g, _ in low if g.roof_ns]
    saving = sum(at_target(g.roof_ns, g.ideal_ns) for g in roofed) if roofed else None
    return [Finding(
        "low_occupancy", f"kernels {top([f'{k} ({o:.0f}%)' for k, _, o in low])}",
        f"{share(low_ns, c.kernel_ns)} of kernel time in kernels (not on Tensor Cores) with estimated occupancy "
        f"under {LOW_OCCUPANCY:.0f}%" + ("" if roofed else "; saving not estimated: none of them has a roofline"),
        saving,
        "Grids smaller than the GPU or too many registers/shared memory per block: larger batches, fused ops, "
        "or another kernel configuration", low_ns)]
