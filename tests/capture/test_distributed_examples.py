"""examples/ddp.py and examples/fsdp.py under torchrun, two ranks on the CPU (gloo), a tiny model, two steps.

Each example runs once per module (about 4 s each): one PyTorch profiler trace per rank, each naming its rank
in ``distributedInfo`` and holding the collectives the wrapper issues; --check's per-rank line shows that
the ranks trained on different data (their losses differ) and hold the same parameters afterwards.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyprof.record import end_line

ROOT = Path(__file__).resolve().parents[2]
STEPS = 2
# dim 32, 4 heads, one Block, vocab 128, per rank 2 sequences of 16 tokens (2 x 15 = 30 tokens a step).
TINY = ["--dim", "32", "--heads", "4", "--depth", "1", "--vocab", "128", "--batch", "2", "--seq", "16"]
CHECK = re.compile(r"^(?P<name>\w+) rank (?P<rank>\d+)/2: loss (?P<loss>[\d.]+) params sha256 (?P<sha>[0-9a-f]{16})$",
                   re.M)


def _torchrun(example: str, *options: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    # --standalone: a rendezvous on a free local port, so that runs side by side do not collide.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "examples" / f"{example}.py"), *TINY, "--steps", str(STEPS), "--warmup", "1",
           "--capture", "none", "--check", *options]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    p = _torchrun("ddp", "--torch-trace", str(out / "ddp.json"), "--flops", str(out / "flops.json"))
    assert p.returncode == 0, p.stderr[-3000:]
    return p, out


@pytest.fixture(scope="module")
def fsdp(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    p = _torchrun("fsdp", "--torch-trace", str(out / "fsdp-{rank}.pt.trace.json"))
    assert p.returncode == 0, p.stderr[-3000:]
    return p, out


def _trace(path: Path) -> dict:
    with open(path) as f:
        return json.load(f)


def _count(trace: dict, name: str) -> int:
    return sum(1 for e in trace["traceEvents"] if e.get("name") == name)


def _checks(stdout: str) -> dict[int, dict]:
    return {int(m["rank"]): m.groupdict() for m in CHECK.finditer(stdout)}


def test_ddp_writes_one_trace_per_rank_named_by_rank(ddp):
    _, out = ddp
    assert sorted(f.name for f in out.iterdir()) == ["ddp.rank0.json", "ddp.rank1.json", "flops.json"]
    for rank in (0, 1):
        info = _trace(out / f"ddp.rank{rank}.json")["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, 2)
        assert info["pg_config"][0]["ranks"] == [0, 1]


def test_ddp_all_reduces_the_gradients_once_a_step(ddp):
    _, out = ddp
    for rank in (0, 1):
        trace = _trace(out / f"ddp.rank{rank}.json")
        # Parameters: embedding 128x32 = 4,096; Block: norms 2x64, qkv 32x96+96 = 3,168, proj 32x32+32 = 1,056,
        # fc1 32x128+128 = 4,224, fc2 128x32+32 = 4,128; final norm 64; head 32x128 = 4,096: 20,960 in bf16,
        # 41,920 bytes, one DDP bucket (the first holds 1 MiB): one all-reduce a step.
        assert _count(trace, "gloo:all_reduce") == STEPS
        assert _count(trace, "c10d::allreduce_") == STEPS


def test_ddp_ranks_see_different_data_and_keep_the_same_parameters(ddp):
    p, _ = ddp
    checks = _checks(p.stdout)
    assert sorted(checks) == [0, 1] and {c["name"] for c in checks.values()} == {"ddp"}
    assert checks[0]["loss"] != checks[1]["loss"]
    assert checks[0]["sha"] == checks[1]["sha"]
    summary = [line for line in p.stdout.splitlines() if line.startswith("ddp: ")]
    assert len(summary) == 1 and summary[0].endswith("capture=none, ranks=2")  # rank 0 alone prints it


def test_ddp_flops_are_one_ranks_step_written_once(ddp):
    _, out = ddp
    by_op = json.loads((out / "flops.json").read_text())["by_op"]
    # Linear layers, K x N: qkv 32x96 + proj 32x32 + fc1 32x128 + fc2 128x32 + head 32x128 = 16,384;
    # forward 2 x 30 tokens x 16,384 = 983,040 FLOPs, backward twice that: 2,949,120 (30 tokens: one rank's).
    assert by_op["aten.addmm"] + by_op["aten.mm"] == 2_949_120


def test_parse_reads_a_rank_trace_with_no_gpu_activity(ddp):
    _, out = ddp
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(out / "ddp.rank1.json")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    # A CPU trace has no kernels: not an error, a complete empty output (docs/parse.md, tests/parse/test_cli.py).
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # no records; between the header and the end line only side lines (the ranks' host time: CPU ops, no GPU)
    assert lines[-1] == end_line(0) and all(x.startswith('{"pyprof_side":') for x in lines[1:-1])
    assert "no GPU kernels in this profile" in p.stderr


def test_fsdp_writes_one_trace_per_rank_at_its_placeholder(fsdp):
    _, out = fsdp
    assert sorted(f.name for f in out.iterdir()) == ["fsdp-0.pt.trace.json", "fsdp-1.pt.trace.json"]
    for rank in (0, 1):
        info = _trace(out / f"fsdp-{rank}.pt.trace.json")["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, 2)


def test_fsdp_gathers_parameters_and_scatters_gradients(fsdp):
    _, out = fsdp
    for rank in (0, 1):
        trace = _trace(out / f"fsdp-{rank}.pt.trace.json")
        # Two FSDP groups (the Block, the root). A step all-gathers both for forward and the Block again for
        # backward (the root stays unsharded after forward): 3; it reduce-scatters each group's gradients: 2.
        assert _count(trace, "c10d::_allgather_base_") == 3 * STEPS
        assert _count(trace, "c10d::_reduce_scatter_base_") == 2 * STEPS
        gathers = [e for e in trace["traceEvents"] if e.get("name") == "gloo:all_gather"]
        assert len(gathers) == 3 * STEPS
        assert {e["args"]["Input type"][0] for e in gathers} == {"c10::BFloat16"}  # param_dtype


def test_fsdp_ranks_see_different_data_and_hold_one_model(fsdp):
    p, _ = fsdp
    checks = _checks(p.stdout)
    assert sorted(checks) == [0, 1] and {c["name"] for c in checks.values()} == {"fsdp"}
    assert checks[0]["loss"] != checks[1]["loss"]
    assert checks[0]["sha"] == checks[1]["sha"]  # all-gathered: the shards make one model
