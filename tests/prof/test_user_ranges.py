"""User ranges as the name of the work no op encloses, one name for a custom Function's backward, and Comm% (issue
39, items 2, 10b and 10c; docs/views.md, "User ranges" and "Communication"). Expected numbers are recounted from the
input with plain json or sqlite3, never with the code under test."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from shared_files import CORPUS, require_shared

from pyprof.parse import parse_records
from pyprof.prof.aggregate import aggregate
from pyprof.prof.table.groups import is_comm, layer_key, op_key
from pyprof.prof.views.flat import operators
from pyprof.prof.views.layers import layers

DATA = Path(__file__).resolve().parents[1] / "data"
DEEPSEEK = CORPUS / "external-2026-12" / "deepseek_profile-data_train_h800.json"
DLRM = CORPUS / "external-2026-12" / "param_dlrm_v100_worker0.pt.trace.json"
LTS = CORPUS / "nsys" / "nsys2023.3_lts_la.sqlite"


def _records(path) -> list[dict]:
    records, _stats = parse_records(str(path))
    return [r.to_dict() for r in records]


@pytest.fixture(scope="module")
def deepseek() -> list[dict]:
    require_shared()
    return _records(DEEPSEEK)


def _recount_user_range_ns(path) -> tuple[int, int, dict]:
    """(GPU ns of all kernels and copies, of kernels launched inside a user_annotation and inside no cpu_op, that
    time by innermost user_annotation), recounted from the trace's events with plain json."""
    events = json.load(open(path))["traceEvents"]
    spans = {"cpu_op": {}, "user_annotation": {}}
    launch = {}
    for e in events:
        cat = e.get("cat")
        if cat in spans and e.get("ph") == "X":
            spans[cat].setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = e
    total = inside = 0
    by_name: dict = {}
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        ns = round(e["dur"] * 1000)
        total += ns
        call = launch.get(e["args"].get("correlation"))
        if e["cat"] != "kernel" or call is None:
            continue
        t0, t1 = call["ts"], call["ts"] + call["dur"]
        def around(cat):
            return [s for s in spans[cat].get(call["tid"], ()) if s[0] <= t0 and t1 <= s[1]]
        users = [s for s in around("user_annotation") if not s[2].startswith("ProfilerStep#")]
        if users and not around("cpu_op"):
            inside += ns
            innermost = max(users, key=lambda s: s[0])[2]
            by_name[innermost] = by_name.get(innermost, 0) + ns
    return total, inside, by_name


def test_deepseek_kernels_outside_every_op_are_named_by_their_user_range(deepseek):
    total, inside, by_name = _recount_user_range_ns(DEEPSEEK)
    assert round(100.0 * inside / total, 1) == 77.3  # the corpus README's 77%
    got: dict = {}
    for d in deepseek:
        got[op_key(d)] = got.get(op_key(d), 0) + d["kDuration"]
    assert sum(got.values()) == total
    assert {k: v for k, v in got.items() if k.startswith("range:")} == {f"range:{k}": v for k, v in by_name.items()}
    assert got["range:combine(F)"] == by_name["combine(F)"]
    # after: nothing is left as "na" (every op-less kernel has a user range around it)
    assert "na" not in got
    # ProfilerStep#1 and 1F1B enclose them too, but the innermost range names them
    assert not any(k.startswith("range:ProfilerStep") or k == "range:1F1B" for k in got)


def test_a_range_op_has_a_call_per_instance_of_its_range(deepseek):
    # a range:NAME row's calls are the instances of the range its kernels ran in, not its kernels (SGLang's decode
    # range read 545 calls for one range). Recount: the innermost user_annotation instances (by start) that
    # launched a kernel inside no cpu_op, with plain json
    events = json.load(open(DEEPSEEK))["traceEvents"]
    annotations, ops, launch = {}, {}, {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op"):
            (annotations if e["cat"] == "user_annotation" else ops).setdefault(e["tid"], []).append(e)
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = e
    instances: dict = {}
    kernels: dict = {}
    for e in events:
        call = launch.get(e.get("args", {}).get("correlation")) if e.get("cat") == "kernel" else None
        if call is None:
            continue
        t0, t1 = call["ts"], call["ts"] + call["dur"]
        if any(o["ts"] <= t0 and t1 <= o["ts"] + o["dur"] for o in ops.get(call["tid"], ())):
            continue
        around = [a for a in annotations.get(call["tid"], ()) if a["ts"] <= t0 and t1 <= a["ts"] + a["dur"]
                  and not a["name"].startswith("ProfilerStep#")]
        if around:
            inner = max(around, key=lambda a: a["ts"])
            instances.setdefault(inner["name"], set()).add(inner["ts"])
            kernels[inner["name"]] = kernels.get(inner["name"], 0) + 1
    t = operators(aggregate([("deepseek", deepseek)]))
    c = t.columns
    rows = {r[c.index("op")]: r for r in t.rows}
    for name in ("combine(F)", "dispatch(F)", "mlp(W)"):
        row = rows[f"range:{name}"]
        assert row[c.index("calls")] == len(instances[name]) < kernels[name] == row[c.index("kernels")], name


def test_deepseek_user_ranges_are_layers_and_views_say_what_range_means(deepseek):
    layer_ns: dict = {}
    for d in deepseek:
        layer_ns[layer_key(d)] = layer_ns.get(layer_key(d), 0) + d["kDuration"]
    # the same kernels as the op key's range:mlp(W), now under their path of user ranges
    ops = {op_key(d) for d in deepseek if layer_key(d) == "range:1F1B:range:mlp(W)"}
    assert ops == {"range:mlp(W)"}
    agg = aggregate([("deepseek", deepseek)])
    t = layers(agg)
    assert any(r[t.columns.index("path")] == "range:1F1B/range:combine(F)" for r in t.rows)
    assert any("'range:NAME' layers are user ranges" in n for n in t.notes)
    assert any("'range:NAME': kernels that no op encloses" in n for n in operators(agg).notes)


def test_a_custom_functions_backward_has_one_name(deepseek):
    # DropoutAddLayerNormFn's node ran 32 backward kernels: 16 of them linked to the forward op, 16 not (recount:
    # kernels whose innermost enclosing autograd node range is DropoutAddLayerNormFnBackward)
    keys = {op_key(d) for d in deepseek if d["dir"] == "bprop" and "DropoutAddLayerNormFn" in str(d["ranges"])}
    assert "DropoutAddLayerNormFnBackward (bprop)" not in keys
    n = sum(1 for d in deepseek if op_key(d) == "DropoutAddLayerNormFn (bprop)")
    assert n == 32


def test_built_in_nodes_and_linked_kernels_keep_their_names():
    # silent: a built-in node (a number at the end), and a record without the autograd mod
    assert op_key({"kind": "kernel", "dir": "bprop", "op": ["MulBackward0"], "mod": ["autograd"]}) == \
        "MulBackward0 (bprop)"
    assert op_key({"kind": "kernel", "dir": "bprop", "op": ["FooBackward"], "mod": ["aten"]}) == "FooBackward (bprop)"
    assert op_key({"kind": "kernel", "dir": "bprop", "op": ["FooBackward"], "mod": ["autograd"]}) == "Foo (bprop)"


@pytest.mark.parametrize("ranges,expected", [
    (["ProfilerStep#3", "1F1B", "combine(F)"], "range:combine(F)"),
    (["ProfilerStep#3"], "na"),  # a step is not a work name
    (["train step 12"], "na"),  # nor a user range that numbers an iteration (the overview's steps)
    (['{"mod":"x"}'], "na"),  # pyprof's own payload
    (["module:Linear", "layer:block"], "na"),  # layers, not work names
    (["torch.nn.modules.Module.__call__"], "na"),  # functions-trace's range around every module call
    ([], "na"),
])
def test_which_ranges_name_work(ranges, expected):
    assert op_key({"kind": "kernel", "op": [], "dir": "", "ranges": ranges}) == expected


def test_an_op_keeps_its_name_and_layer_whatever_user_range_encloses_it():
    d = {"kind": "kernel", "op": ["mm"], "mod": ["aten"], "dir": "fprop", "layer": [],
         "ranges": ["ProfilerStep#1", "attn(F)", "aten::mm"]}
    assert op_key(d) == "mm" and layer_key(d) == "-"
    copy = {"kind": "memcpy", "op": [], "dir": "", "ranges": ["attn(F)"]}
    assert op_key(copy) == "memcpy"  # a copy is named by its kind, as before


def test_committed_captures_whose_ops_enclose_every_kernel_do_not_change():
    # tests/data/kineto/user_annotation: record_function ranges around ops. Recount: every kernel of the trace is
    # launched inside a cpu_op, so none is named by a range (and none's layer is one)
    recs = _records(DATA / "kineto" / "user_annotation.pt.trace.json.gz")
    assert all(d["op"] for d in recs if d["kind"] == "kernel")
    assert not any(op_key(d).startswith("range:") or "range:" in layer_key(d) for d in recs)


def test_nsys_nvtx_ranges_name_kernels():
    require_shared()
    # Recount with sqlite3: kernel time whose launch (runtime call) lies inside an NVTX push/pop range of its thread
    db = sqlite3.connect(f"file:{LTS}?mode=ro", uri=True)
    total = db.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    inside = db.execute("""
        SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON r.correlationId = k.correlationId
        WHERE EXISTS (SELECT 1 FROM NVTX_EVENTS n WHERE n.globalTid = r.globalTid AND n.start <= r.start
                      AND r.end <= n.end AND n.end IS NOT NULL)""").fetchone()[0]
    recs = _records(LTS)
    kernels = [d for d in recs if d["kind"] == "kernel"]
    assert sum(d["kDuration"] for d in kernels) == total
    named = sum(d["kDuration"] for d in kernels if op_key(d).startswith("range:"))
    assert named == inside
    assert any(op_key(d) == "range:Inner Level 0" for d in kernels)


def test_dlrm_comm_ops_are_communication():
    require_shared()
    recs = _records(DLRM)
    # Recount with plain json: the NCCL kernels' time, all of it in the trace's one all-to-all kernel group
    events = json.load(open(DLRM))["traceEvents"]
    nccl_ns = sum(round(e["dur"] * 1000) for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    assert sum(d["kDuration"] for d in recs if is_comm(d["kShortName"])) == nccl_ns
    t = operators(aggregate([("x", recs)]))
    c = {k: t.columns.index(k) for k in ("op", "comm_pct", "tflops")}
    rows = {r[c["op"]]: r for r in t.rows}
    top = t.rows[0]
    assert top[c["op"]] == "All2All_Pooled_Req" and top[c["comm_pct"]] == 100.0
    assert rows["linear (bprop)"][c["comm_pct"]] == 0.0  # silent: a GEMM
    note = next(n for n in t.notes if n.startswith("Communication, not computation"))
    assert note.split(": ", 1)[1].startswith("All2All_Pooled_Req, allreduce_ (bprop)")


def test_no_comm_note_without_nccl_kernels():
    recs = _records(DATA / "kineto" / "user_annotation.pt.trace.json.gz")
    t = operators(aggregate([("x", recs)]))
    assert not any(n.startswith("Communication, not computation") for n in t.notes)
    assert not any("'range:NAME'" in n for n in t.notes)
    assert all(r[t.columns.index("comm_pct")] == 0.0 for r in t.rows)


def test_deepep_all_to_all_is_communication(deepseek):
    """DeepEP's dispatch/combine kernels (namespace dpsk::ep::internode in DeepSeek's trace) move tokens between
    GPUs: communication, though no kernel of that trace is NCCL's. Its layout kernel (ep::cuda) computes only."""
    events = json.load(open(DEEPSEEK))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    # Recount with plain json: the kernels of the internode namespace (12 cached_notify, 4 notify_dispatch,
    # 8 dispatch, 8 combine in the trace)
    ep = [e for e in kernels if "::ep::internode::" in e["name"]]
    assert len(ep) == 32
    ep_ns = sum(round(e["dur"] * 1000) for e in ep)
    comm = [d for d in deepseek if d.get("kind") == "kernel" and is_comm(d["kShortName"], d.get("kLongName"))]
    assert len(comm) == 32 and sum(d["kDuration"] for d in comm) == ep_ns
    layout = [d for d in deepseek if "get_dispatch_layout" in (d.get("kLongName") or "")]
    assert layout and not any(is_comm(d["kShortName"], d.get("kLongName")) for d in layout)
    t = operators(aggregate([("x", deepseek)]))
    rows = {r[t.columns.index("op")]: r for r in t.rows}
    assert rows["range:combine(F)"][t.columns.index("comm_pct")] == 100.0
    assert rows["range:mlp(F)"][t.columns.index("comm_pct")] == 0.0  # silent: DeepGEMM's GEMMs


def test_low_occupancy_leaves_deepep_out_as_it_leaves_nccl_out(deepseek):
    """DeepEP's kernels run a few blocks per channel by design, as NCCL's do: not a low-occupancy finding. In the
    trace they hold 33% of the GPU time (the 32 kernels of the test above) and would be most of the rule's time."""
    from pyprof.prof.views.recommend import recommendations

    t = recommendations(aggregate([("x", deepseek)]))
    about = [r[t.columns.index("about")] for r in t.rows if r[t.columns.index("rule")] == "low_occupancy"]
    assert not any(name in a for a in about for name in ("combine", "dispatch", "notify"))


def test_symmetric_memory_all_reduce_is_communication():
    """vLLM's tensor-parallel all-reduce on a B200 (TraceLens's trace) runs PyTorch's symm_mem kernel, not NCCL's:
    73 ``multimem_all_reduce_kernel`` launches beside one NCCL all-gather. Both are communication; the MoE and
    GEMM kernels around them are not, nor is a reduction of one GPU's data."""
    import gzip

    from shared_files import EXTERNAL, require_shared

    require_shared()
    events = json.load(gzip.open(EXTERNAL / "tracelens_b200_eager_trace.json.gz"))["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "kernel"]
    multimem = [n for n in names if "::multimem_all_reduce_kernel<" in n]
    assert len(multimem) == 73
    assert all(is_comm("multimem_all_reduce_kernel", n) for n in multimem)
    for short in ("one_shot_all_reduce_kernel", "two_shot_all_reduce_kernel_inplace", "cross_device_reduce_1stage"):
        assert is_comm(short)
    for short in ("reduce_kernel", "cunn_SoftMaxForward", "all_reduce_sum", "nvjet_tst_64x16_64x16_2x4_2cta_h"):
        assert not is_comm(short)
