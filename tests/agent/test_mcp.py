"""Issue 45: ``pyprof mcp``, the tools a coding agent calls, answered in-process through the MCP SDK's own client
on committed captures (the README's H200 transformer, a Llama serving loop under pyprof run --forward-steps, and
the two runs of docs/diff.md). Every answer's rows equal what the CLI prints for the same question, each answer
fits its budget, and a tool reads the files it is given and nothing else."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp.client.client import Client  # noqa: E402

from pyprof.agent import answers  # noqa: E402
from pyprof.agent.server import server  # noqa: E402
from pyprof.prof.views import names  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "examples" / "profiles" / "transformer_h200.sqlite.xz"
SERVE = ROOT / "tests" / "data" / "inference" / "serve_prefill_decode.sqlite.xz"
FOREACH = ROOT / "tests" / "data" / "diff" / "transformer_foreach.sqlite.xz"
FUSED = ROOT / "tests" / "data" / "diff" / "transformer_fused.sqlite.xz"


def _cli(*args: str) -> list[dict]:
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", *args], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    return [json.loads(x) for x in p.stdout.splitlines()]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict:
    """The captures parsed once, as the CLI's own records files."""
    out = {}
    d = tmp_path_factory.mktemp("records")
    for name, src in (("h200", H200), ("serve", SERVE), ("foreach", FOREACH), ("fused", FUSED)):
        dest = d / f"{name}.dict"
        p = subprocess.run([sys.executable, "-m", "pyprof.cli", "parse", str(src), "-o", str(dest)],
                           capture_output=True, text=True, cwd=ROOT)
        assert p.returncode == 0, p.stderr[-2000:]
        out[name] = str(dest)
    out["empty_root"] = str(d / "no_source")
    Path(out["empty_root"]).mkdir()
    return out


def _call(calls: list[tuple[str, dict]]) -> list:
    """Each (tool, arguments) through the SDK's client, connected in-process to a fresh server."""
    async def go():
        async with Client(server()) as c:
            return [await c.call_tool(name, args) for name, args in calls]
    return asyncio.run(go())


def test_the_server_lists_its_five_tools_with_their_guide():
    async def go():
        async with Client(server()) as c:
            return await c.list_tools(), c.instructions
    tools, guide = asyncio.run(go())
    assert sorted(t.name for t in tools.tools) == ["diff", "findings", "headline", "kernels", "view"]
    assert all(t.description for t in tools.tools)
    assert "pyprof run -o out -- python train.py" in (guide or "")


@pytest.mark.parametrize("capture", ["h200", "serve"])
def test_every_view_answers_as_the_cli_prints_it(records, capture):
    path = records[capture]
    calls = [("view", {"path": path, "name": n, "top": 8}) for n in names()]
    for n, r in zip(names(), _call(calls)):
        assert not r.is_error, r.content
        got = r.structured_content
        cli = _cli("prof", "--view", n, "--jsonl", "--source-root", records["empty_root"], path)
        rows = [row for t in got["tables"] for row in t["rows"]]
        if len(got["tables"]) > 1:  # a view of several tables: the CLI's rows carry the view's name first
            cli = [{k: v for k, v in c.items() if k != "view"} for c in cli]
        assert len(json.dumps(got)) <= answers.MAX_ANSWER_CHARS
        if "left_out" not in got:
            # the first rows of each table, as the CLI prints them (the CLI prints the tables one after another)
            start = 0
            for t in got["tables"]:
                assert t["rows"] == cli[start:start + len(t["rows"])], n
                start += t["rows_total"]
        assert got["cite"]["command"].startswith(f"pyprof prof --view {n} --jsonl")


def test_headline_findings_and_kernels_equal_the_clis(records):
    path = records["h200"]
    head, found, by_op, by_line = _call([
        ("headline", {"path": path}), ("findings", {"path": path, "top": 3}),
        ("kernels", {"path": path, "op": "linear", "top": 500}),
        ("kernels", {"path": path, "line": "transformer.py:31", "top": 5})])
    h = head.structured_content["headline"]
    overview = _cli("prof", "--view", "overview", "--jsonl", path)
    (mean,) = [r for r in overview if r["step"] == "mean"]
    assert h["step_ms"] == round(mean["span_ms"], 4) and h["steps"] == 2  # two ProfilerSteps in this capture
    ops = _cli("prof", "--view", "operators", "--jsonl", path)
    assert [(e["label"], e["ms"]) for e in h["top_ops"]] == [(r["op"], r["device_ms"]) for r in ops[:3]]
    assert h["activities"] == 538 == head.structured_content["cite"]["gpu_activities"]  # 442 kernels + 96 copies
    # findings: the recommendations view's first three, evidence and all
    # (the server quotes no source text: nor does the CLI given an empty --source-root)
    rec = _cli("prof", "--view", "recommendations", "--jsonl", "--source-root", records["empty_root"], path)
    f = found.structured_content
    assert f["findings"] == rec[:3] and f["findings_total"] == len(rec)
    assert all(x["evidence"] for x in f["findings"])
    # kernels of linear: forward and backward, each row the CLI's per-kernel row of the same record
    k = by_op.structured_content
    cols = ",".join(answers.KERNEL_COLUMNS)
    per_kernel = {r["idx"]: r for r in _cli("prof", "-c", cols, "--jsonl", path)}
    # as many as the operators view counts for linear and linear (bprop): 34 + 100
    assert k["kernels_total"] == 134 == sum(r["kernels"] for r in ops if r["op"] in ("linear", "linear (bprop)"))
    assert "left_out" in k or len(k["kernels"]) == 134
    for row in k["kernels"]:
        assert row == per_kernel[row["idx"]]
    assert {r["dir"] for r in k["kernels"]} == {"fprop", "bprop"}
    assert all(isinstance(r["idx"], int) for r in k["kernels"]) and "idx" in k["cite"]["records"]
    line = by_line.structured_content
    assert line["kernels"] and all(per_kernel[r["idx"]] == r for r in line["kernels"])
    lines = {r["line"]: r for r in _cli("prof", "--view", "lines", "--jsonl", path)}
    assert line["time_ms"] == pytest.approx(lines["transformer.py:31"]["gpu_ms"], abs=1e-3)


def test_diff_answers_as_pyprof_diff_prints_it(records):
    (r,) = _call([("diff", {"base": records["foreach"], "new": records["fused"], "top": 5})])
    got = r.structured_content
    cli = _cli("diff", records["foreach"], records["fused"], "--top", "5", "--jsonl")
    for t in got["tables"]:
        mine = [{k: v for k, v in c.items() if k != "view"} for c in cli if c.get("view") == t["table"]]
        assert t["rows"] == mine[:len(t["rows"])], t["table"]
    steps = next(t for t in got["tables"] if t["table"] == "diff_steps")
    assert steps["rows"]


def test_a_bad_input_is_one_line_marked_as_an_error(records, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a profile\n")
    missing, not_profile, unknown, nothing = _call([
        ("headline", {"path": str(tmp_path / "missing.sqlite")}), ("headline", {"path": str(bad)}),
        ("view", {"path": records["h200"], "name": "bogus"}), ("kernels", {"path": records["h200"]})])
    for r in (missing, not_profile, unknown, nothing):
        assert r.is_error and len(r.content) == 1 and "\n" not in r.content[0].text
    assert "missing.sqlite: no such file" in missing.content[0].text
    assert str(bad) in not_profile.content[0].text
    assert "choose one of overview" in unknown.content[0].text
    assert "give op or line" in nothing.content[0].text


def test_the_cited_command_prints_the_same_rows_for_an_export_too(records):
    # prof reads records only: for an export the command parses it on the way
    (r,) = _call([("findings", {"path": str(H200), "top": 2})])
    got = r.structured_content
    command = got["cite"]["command"]
    assert command.startswith(f"pyprof parse {H200} | pyprof prof ") and command.endswith(" -")
    p = subprocess.run(command + f" --source-root {records['empty_root']}", shell=True, capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert [json.loads(x) for x in p.stdout.splitlines()][:2] == got["findings"]


def test_an_answer_keeps_to_its_budget_and_says_what_it_left_out(records):
    (r,) = _call([("kernels", {"path": records["h200"], "op": "linear", "top": 10_000})])
    got = r.structured_content
    assert len(json.dumps(got, separators=(",", ":"))) <= answers.MAX_ANSWER_CHARS
    assert "left_out" in got and len(got["kernels"]) < got["kernels_total"] == 134


AUDIT = r'''
import asyncio, json, os, sys
opened = set()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        opened.add(os.path.realpath(os.fsdecode(args[0])))
from mcp.client.client import Client
from pyprof.agent.server import server
async def go():
    async with Client(server()) as c:
        sys.addaudithook(hook)
        for name in ("headline", "findings"):
            r = await c.call_tool(name, {"path": sys.argv[1]})
            assert not r.is_error
        r = await c.call_tool("view", {"path": sys.argv[1], "name": "lines"})
        assert not r.is_error
asyncio.run(go())
print(json.dumps(sorted(opened)))
'''


def test_a_tool_reads_the_file_it_is_given_and_no_source_text(tmp_path):
    # the export's lines name /work/main/examples/transformer.py and the like: the lines view would quote them
    # from the current folder; the server reads no source unless started with --source-root
    import shutil
    import tempfile

    profile = tmp_path / "run.sqlite.xz"
    shutil.copy(H200, profile)
    script = tmp_path / "audit.py"
    script.write_text(AUDIT)
    # the package under test, wherever an installed one lies
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, str(script), str(profile)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    opened = json.loads(p.stdout.splitlines()[-1])
    code = (sys.prefix, sys.base_prefix, str(ROOT / "pyprof"), "/proc/", "/dev/", "/sys/")
    tmp = os.path.realpath(tempfile.gettempdir())
    others = [f for f in opened if not f.startswith(code) and f != str(profile.resolve()) and not f.startswith(tmp)]
    assert others == []
    assert not any(f.endswith(".py") and "/examples/" in f for f in opened)


def test_pyprof_mcp_serves_over_stdio(records):
    # the command itself, as an agent's client starts it: a subprocess on stdin and stdout
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "pyprof.cli", "mcp"], cwd=str(ROOT))

    async def go():
        async with Client(params) as c:
            return await c.call_tool("headline", {"path": records["h200"]})
    r = asyncio.run(go())
    assert not r.is_error and r.structured_content["headline"]["steps"] == 2
    bad = subprocess.run([sys.executable, "-m", "pyprof.cli", "mcp", "--source-root", str(ROOT / "nowhere")],
                         capture_output=True, text=True, input="", cwd=ROOT)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1 and "not a folder" in bad.stderr
