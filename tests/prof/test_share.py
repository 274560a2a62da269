"""An op call's FLOPs and bytes are shared among the kernels that do its work, in proportion to their
durations: no kernel row claims more than the GPU can do, and every total over calls stays what it was."""
from __future__ import annotations

import io
import json

import pytest

from pyprof.prof.table.columns import COLUMNS
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.table.rows import rows
from pyprof.prof.table.per_kernel import run_stream
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.model.share import WINDOW, apportion
from pyprof.prof.table.groups import op_key

from .helpers import S, T, captures, parsed, rec


def test_apportion_adds_up_exactly():
    assert apportion(10, [1, 1, 1]) == [4, 3, 3]  # 3 each and 1 left: the tie goes to the first
    assert apportion(100, [3, 1]) == [75, 25]
    assert apportion(7, [0, 0]) == [4, 3]  # no durations: equal parts
    assert apportion(5, [2, 1, 1]) == [3, 1, 1]  # 2.5, 1.25, 1.25: remainders .5 .25 .25 -> the first gets the 1
    assert apportion(None, [1, 2]) == [None, None]
    assert apportion(0, [5, 5]) == [0, 0]


def _rows(records: list[dict]) -> list:
    return list(rows(enumerate(records, 1), Modeller(share=True), Peaks(), True, Coverage()))


def test_a_pointwise_call_shares_by_duration():
    """add of two [30] fp32 tensors: 30 FLOPs, (30 + 30 + 30)·4 = 360 bytes, run as two kernels of 100 and
    200 ns: 10 and 20 FLOPs, 120 and 240 bytes; both at the call's rate."""
    kw = dict(op="add", mod="torch", args=[T([30]), T([30])])
    out = _rows([rec("elementwise_kernel", 100, sub=0, **kw), rec("elementwise_kernel", 200, sub=1, **kw),
                 rec("elementwise_kernel", 50, sub=0, seq=(2,), **kw)])
    assert [(m.flops, m.bytes) for _i, _d, m, _r in out] == [(10, 120), (20, 240), (30, 360)]
    assert out[0][3][0] == out[1][3][0]  # the same TFLOP/s: 10/100 = 20/200


def test_a_kernel_that_only_sorts_or_copies_shares_the_bytes_not_the_flops():
    """The same add run as a radix sort (100 ns), a copy (50 ns) and the kernel that adds (150 ns): the 30 FLOPs
    all on the adding kernel, the 360 bytes by duration (120, 60, 180); the totals stay the call's."""
    kw = dict(op="add", mod="torch", args=[T([30]), T([30])])
    sort = "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, unsigned int>>"
    out = _rows([rec(sort, 100, sub=0, **kw), rec("direct_copy_kernel_cuda", 50, sub=1, **kw),
                 rec("vectorized_elementwise_kernel", 150, sub=2, **kw)])
    assert [(m.flops, m.bytes) for _i, _d, m, _r in out] == [(0, 120), (0, 60), (30, 180)]
    # a call made only of such kernels keeps sharing its FLOPs by duration (they are all it ran)
    out = _rows([rec(sort, 100, sub=0, **kw), rec(sort, 200, sub=1, **kw)])
    assert [m.flops for _i, _d, m, _r in out] == [10, 20]


def test_helpers_keep_their_result_and_backward_gemms_share_per_gradient():
    """A backward linear whose dgrad runs as one kernel and whose wgrad runs as two (split-K: a third main
    kernel continues the gradient before it): each gradient is 2·64·512·256 = 16777216 FLOPs; the wgrad
    kernels of 30 and 10 ns take 3/4 and 1/4 of it."""
    lin = [T([64, 256], "bfloat16"), T([512, 256], "bfloat16"), T([512], "bfloat16")]
    fwd = {"mod": ["torch.nn.functional"], "op": ["linear"], "args": lin}
    kw = dict(op="AddmmBackward0", mod="aten", dir="bprop", fwd=fwd, seq=(7,))
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"
    out = _rows([rec("void at::native::reduce_kernel<512, 1>", 5, sub=0, **kw), rec(gemm, 20, sub=1, **kw),
                 rec(gemm, 30, sub=2, **kw), rec(gemm, 10, sub=3, **kw)])
    res = [m for _i, _d, m, _r in out]
    assert res[0].flops is None and res[0].reason.startswith("helper kernel")
    assert (res[1].role, res[1].flops) == ("dgrad", 16777216)
    assert [r.flops for r in res[2:]] == [12582912, 4194304]  # 16777216·3/4, ·1/4
    assert res[2].role == res[3].role == "wgrad"


def test_kernels_of_the_one_gradient_that_exists_share_it():
    """convolution_backward of a first layer (output_mask asks for the weight gradient only) run as two main
    kernels: whatever roles their order gives them, both compute the one wgrad, 2·2·4·3·9·64 = 27648 FLOPs,
    which they share (20 and 60 ns: 6912 and 20736), rather than each counting it."""
    args = [T([2, 4, 8, 8]), T([2, 3, 8, 8]), T([4, 3, 3, 3]), S([4]), S([1, 1]), S([1, 1]), S([1, 1]), S(False),
            S([0, 0]), S(1), S([False, True, False])]
    kw = dict(op="aten::convolution_backward", mod="aten", dir="bprop", args=args, seq=(5,))
    gemm = "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_stage3_warpsize2x2x1_tensor16x8x8_kernel"
    out = _rows([rec(gemm, 20, sub=0, **kw), rec(gemm, 60, sub=1, **kw)])
    assert [m.flops for _i, _d, m, _r in out] == [6912, 20736]


def test_a_kernel_far_after_its_call_start_shares_nothing():
    """A call whose kernels are spread over more than WINDOW lines (another thread's kernels between them):
    its numbers stay on its kernels within WINDOW lines of its first one, so its total is unchanged; the later
    kernel says why it has none."""
    kw = dict(op="add", mod="torch", args=[T([30]), T([30])])

    def others(n, base):
        return [rec("elementwise_kernel", 10, op="mul", mod="torch", args=[T([4]), T([4])], tid=2, sub=0,
                    seq=(base + i,)) for i in range(n)]

    gap = WINDOW * 6 // 10  # under WINDOW between two kernels of the call, over it from the first to the last
    out = _rows([rec("elementwise_kernel", 100, sub=0, **kw), rec("elementwise_kernel", 100, sub=1, **kw),
                 *others(gap, 100), rec("elementwise_kernel", 100, sub=2, **kw), *others(gap, 10_000),
                 rec("elementwise_kernel", 100, sub=3, **kw)])
    add = [m for _i, d, m, _r in out if d["op"] == ["add"]]
    assert [m.flops for m in add] == [10, 10, 10, None]  # 30 FLOPs over three kernels of 100 ns
    assert add[3].reason.startswith("counted on the first kernels of the same add call")


def test_parse_call_id_keeps_a_call_whole_across_a_gap():
    """Two kernels of one add call (30 FLOPs) with more than WINDOW lines of another thread's kernels between them:
    the record's call_id says they are one call, so the second is not taken for a new call given the whole 30
    again (a total of 60 where the program did 30); it is counted on the first, which keeps the call's numbers."""
    kw = dict(op="add", mod="torch", args=[T([30]), T([30])], call_id=7)
    others = [rec("elementwise_kernel", 10, op="mul", mod="torch", args=[T([4]), T([4])], tid=2, sub=0,
                  seq=(100 + i,), call_id=8 + i) for i in range(WINDOW + 10)]
    out = _rows([rec("elementwise_kernel", 100, sub=0, **kw), *others, rec("elementwise_kernel", 100, sub=1, **kw)])
    add = [m for _i, d, m, _r in out if d["op"] == ["add"]]
    assert [m.flops for m in add] == [30, None]
    assert add[1].reason.startswith("counted on the first kernels of the same add call")


def test_parse_call_id_keeps_a_call_whole_across_inner_sequence_numbers():
    """A Kineto trace's fb::rms_norm is not numbered, the aten ops inside it are: its kernels' first sequence
    numbers differ, yet their call_id says they are one call. add of two [30] fp32 tensors (30 FLOPs) run as kernels
    of 100 and 200 ns under inner ops numbered 10 and 11: 10 and 20 FLOPs, not 30 each."""
    kw = dict(op="add", mod="torch", args=[T([30]), T([30])], call_id=5)
    out = _rows([rec("elementwise_kernel", 100, sub=0, seq=(10,), **kw),
                 rec("elementwise_kernel", 200, sub=1, seq=(11,), **kw)])
    assert [m.flops for _i, _d, m, _r in out] == [10, 20]


@pytest.mark.parametrize("rel", captures())
def test_no_kernel_row_above_150_percent_of_the_roofline(rel):
    """The issue's acceptance: on every committed H200 capture, no row claims more than 1.5x what the GPU can
    do. (Rows between 100% and 115% remain: element-wise ops whose operands the previous kernel left in the
    H200's 60 MB L2 cache, which the DRAM roofline does not know; docs/roofline.md.) Captures made on another
    GPU (tests/data/README.md) are held to 200%: a smaller L2 at a lower DRAM bandwidth lets an L2-resident
    element-wise kernel read further above the DRAM's rate."""
    data = parsed(rel)
    h200 = b'"gpu":"NVIDIA H200"' in data
    out = io.StringIO()
    run_stream(io.BytesIO(data), rel, out, ["roofline", "op", "kernel"], "jsonl")
    rows_ = [json.loads(x) for x in out.getvalue().splitlines()]
    if not h200:
        assert not [r for r in rows_ if r["roofline"] is not None and r["roofline"] > 200]
        return
    over = [r for r in rows_ if r["roofline"] is not None and r["roofline"] > 150]
    assert sum(r["roofline"] is not None for r in rows_) >= 5
    assert not over, over[:5]


@pytest.mark.parametrize("rel", ["nsys/pyprof/transformer.sqlite.xz", "kineto/transformer.pt.trace.json.gz",
                                 "nsys/pyprof/resnet.sqlite.xz", "nsys/emit_nvtx/resnet.sqlite.xz"])
def test_sharing_keeps_every_ops_totals(rel):
    """Per op (backward kernels under their forward op, as --group-by op groups them), FLOPs and bytes summed
    over the shared rows equal those of the record-by-record model, which puts each call's whole numbers on
    one kernel."""
    recs = [json.loads(x) for x in parsed(rel).splitlines() if x.strip()]
    whole, shared = {}, {}
    m = Modeller()
    for d in recs:
        r = m.model(d)
        g = whole.setdefault(op_key(d), [0, 0])
        g[0] += r.flops or 0
        g[1] += r.bytes or 0
    n_shared = 0
    for _i, d, r, _roof in _rows(recs):
        g = shared.setdefault(op_key(d), [0, 0])
        g[0] += r.flops or 0
        g[1] += r.bytes or 0
        n_shared += r.flops is not None and (m.model(d).flops or 0) != r.flops
    assert shared == whole
    assert n_shared > 0  # kernels whose numbers did move


def test_the_foreach_call_of_the_issue_runs_at_its_own_rate():
    """The issue's example: the first multi_tensor_apply_kernel of _foreach_addcmul_ showed 520.9% of the
    roofline and 25,004 GB/s. Its call's kernels now share the call's bytes by duration: they add up to the
    call's total, every one at the call's GB/s, which is under the H200's 4,800 GB/s."""
    out = io.StringIO()
    run_stream(io.BytesIO(parsed("nsys/pyprof/transformer.sqlite.xz")), "t", out,
               ["op", "kernel", "sil", "bytes", "gbps", "roofline"], "jsonl")
    rows_ = [json.loads(x) for x in out.getvalue().splitlines()]
    calls, cur = [], None
    for r in rows_:
        if r["op"] == "_foreach_addcmul_":
            if cur is None:
                cur = []
                calls.append(cur)
            cur.append(r)
        else:
            cur = None
    assert calls and all(len(c) > 1 for c in calls)
    for c in calls:
        total_bytes, total_ns = sum(r["bytes"] for r in c), sum(r["sil"] for r in c)
        rate = total_bytes / total_ns
        assert rate < 4800
        for r in c:
            assert r["gbps"] == pytest.approx(rate, rel=1e-6)
            assert r["roofline"] < 100


def test_other_nodes_of_a_forward_op_join_its_backward_call():
    """cross_entropy's backward runs as NllLossBackward0 (a zero fill and a scatter) then LogSoftmaxBackward0;
    pyprof markers give their aten ops no arguments. The forward op's backward numbers (6 FLOPs per logit:
    6·4088·32000 = 784896000) are shared by the kernels of both nodes, not put on the first node alone."""
    out = io.StringIO()
    run_stream(io.BytesIO(parsed("nsys/pyprof/transformer.sqlite.xz")), "t", out,
               ["dir", "op", "kernel", "sil", "flops", "roofline"], "jsonl")
    rows_ = [json.loads(x) for x in out.getvalue().splitlines()]
    at = next(i for i, r in enumerate(rows_) if r["op"] == "nll_loss_backward")
    call = rows_[at:at + 3]
    assert [r["op"] for r in call] == ["nll_loss_backward", "nll_loss_backward", "_log_softmax_backward_data"]
    assert sum(r["flops"] for r in call) == 784896000
    assert all(r["roofline"] < 100 for r in call)


def test_every_columns_values_are_the_same_whatever_other_columns_are_selected():
    """Each column alone gives the values it gives among all columns (roofline, tflops and gbps need the
    duration, which the lean decoder now always reads; the coverage needs it too)."""
    data = parsed("nsys/pyprof/transformer.sqlite.xz")
    full = io.StringIO()
    cov_all = run_stream(io.BytesIO(data), "t", full, list(COLUMNS), "jsonl")
    table = [json.loads(x) for x in full.getvalue().splitlines()]
    for col in COLUMNS:
        out = io.StringIO()
        cov = run_stream(io.BytesIO(data), "t", out, [col], "jsonl")
        assert [json.loads(x)[col] for x in out.getvalue().splitlines()] == [r[col] for r in table], col
        assert cov.text() == cov_all.text()
    assert cov_all.time_ns > 0 and any(r["roofline"] for r in table)
