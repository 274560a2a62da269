"""Issue 43, item 2: an inference loop as it runs. ``pyprof run --forward-steps`` makes each outermost module call a
step (each token of generate()); prof tells prefill from decode by the tokens each forward's embedding lookup read,
and sets the program's own forward time (the loop's time per output token) beside the captured one. Captures from an
H100 (tests/data/README.md): a Llama built from its config, generate() 4 times for 4 prompts of 128 tokens, 48
tokens each, timed by the script itself token by token (a streamer)."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.views import build
from pyprof.record import program_line

DATA = Path(__file__).resolve().parents[1] / "data" / "inference"


def _records(name: str, folder, with_timing: bool = True):
    """A capture parsed into ``folder``, with pyprof run's program line from its timing file (as pyprof run joins
    them) or without."""
    t = json.loads((DATA / f"{name}.timing.json").read_text())
    side = [program_line(t["pid"], t["unprofiled_step_ns"], t["captured_step_ns"], t["how"])] if with_timing else []
    records = folder / f"{name}{'' if with_timing else '.plain'}.dict"
    with open(records, "w") as out:
        parse_file(str(DATA / f"{name}.sqlite.xz"), out, side_lines=side)
    return records


def _view(name: str, tmp_path, view: str, with_timing: bool = True):
    (table,) = build(aggregate_files([str(_records(name, tmp_path, with_timing))]), [view])
    return table


def _overview(name: str, tmp_path, with_timing: bool = True):
    return _view(name, tmp_path, "overview", with_timing)


def test_a_window_over_a_generate_calls_first_forward_tells_prefill_from_decode(tmp_path):
    table = _overview("serve_prefill_decode", tmp_path)
    labels = [r[0] for r in table.rows if r[0] != "mean"]
    # --warmup 94 --steps 4 with 48 forwards a generate() call: forwards 95 and 96 end the 2nd call, 97 is the 3rd
    # call's prefill (4 prompts x 128 tokens: 512), 98 its first decode (one token for each of the 4 sequences)
    assert labels == ["ProfilerStep#0 decode (4 tokens)", "ProfilerStep#1 decode (4 tokens)",
                      "ProfilerStep#2 prefill (512 tokens)", "ProfilerStep#3 decode (4 tokens)"]
    kernels = {r[0]: r[table.columns.index("kernels")] for r in table.rows}
    # the prefill runs more kernels than a decode (the cache's set-up and the prompt's attention)
    assert kernels["ProfilerStep#2 prefill (512 tokens)"] > kernels["ProfilerStep#0 decode (4 tokens)"]
    note = next(n for n in table.notes if n.startswith("Each step is one forward"))
    assert "1 prefill, 3 decode (4 tokens each" in note and "Time per output token, the program's own" in note
    assert any(n.startswith("Program forward ") for n in table.notes)


def test_the_programs_own_forward_is_the_loops_own_time_per_token():
    # The timer pyprof run put at each forward's end against the script's own clock (a streamer, token by token) in
    # the same process: the 2nd generate() call (forwards 49-96) ran before the window, nothing of the capture on.
    # Its decode forwards 50-94 are the timer's unprofiled steps 48-92 (the 1st forward starts the timing).
    timer = json.loads((DATA / "serve_prefill_decode.timing.json").read_text())["unprofiled_step_ns"]
    streamer = json.loads((DATA / "serve_prefill_decode.streamer.json").read_text())["rounds"][1]["per_token_s"]
    ours = statistics.median(timer[48:93]) / 1e6
    theirs = statistics.median(streamer) * 1e3
    assert abs(ours - theirs) <= 0.02 * theirs, (ours, theirs)


def test_a_window_of_decodes_alone_says_they_are_of_one_kind(tmp_path):
    table = _overview("serve_decode", tmp_path)
    assert [r[0] for r in table.rows if r[0] != "mean"] == [f"ProfilerStep#{i}" for i in range(6)]
    note = next(n for n in table.notes if n.startswith("Each step is one forward"))
    assert "read 4 tokens: all of one kind" in note and "prefill," not in note


def test_without_the_programs_forward_timing_the_steps_are_plain_steps(tmp_path):
    # the same capture parsed without pyprof run's timing file: nothing says its steps are forwards
    table = _overview("serve_prefill_decode", tmp_path, with_timing=False)
    assert [r[0] for r in table.rows if r[0] != "mean"] == [f"ProfilerStep#{i}" for i in range(4)]
    assert not any(n.startswith(("Each step is one forward", "Program ")) for n in table.notes)


def _actions(name: str, tmp_path, with_timing: bool = True) -> dict:
    table = _view(name, tmp_path, "recommendations", with_timing)
    c = table.columns
    return {r[c.index("rule")]: r[c.index("action")] for r in table.rows}


def test_the_findings_of_a_decode_loop_speak_of_decoding(tmp_path):
    # 4 ms of host work per token around 0.5 ms of kernels: launch-bound, waiting on the host between forwards
    actions = _actions("serve_prefill_decode", tmp_path)
    assert actions["launch_bound"].startswith("Launch-bound decoding: run the decode step as a CUDA graph")
    assert "sampling" in actions["idle_gaps"] and "zero_grad" not in actions["idle_gaps"]
    # the same capture without the program's forward timing: nothing says these steps are forwards, and with no
    # backward pass or optimizer in the records the actions speak of neither
    plain = _actions("serve_prefill_decode", tmp_path, with_timing=False)
    assert plain["launch_bound"].startswith("Launch-bound: CUDA graphs")
    assert "optimizer" not in plain["launch_bound"] and "zero_grad" not in plain["idle_gaps"]
    assert "DataLoader" not in plain["idle_gaps"]


def test_diff_counts_forwards_where_both_runs_stepped_by_forward(tmp_path):
    import subprocess
    import sys

    paths = [str(_records(name, tmp_path)) for name in ("serve_decode", "serve_prefill_decode")]
    p = subprocess.run([sys.executable, "-m", "pyprof.cli", "diff", *paths, "--table", "runs", "--jsonl"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    # 6 decode forwards against 3 decodes and a prefill, each run's times per forward
    assert [(r["steps"], r["step_source"]) for r in rows] == [(6, "forwards of an inference loop"),
                                                              (4, "forwards of an inference loop")]


def test_the_reports_headline_speaks_of_forwards(tmp_path):
    from pyprof.report.headline import headline

    t = json.loads((DATA / "serve_prefill_decode.timing.json").read_text())
    h = headline(aggregate_files([str(_records("serve_prefill_decode", tmp_path))]), [], 0)
    # the program's own forward: the median of the timer's unprofiled forwards, in ms
    assert h.unit == "forward" and h.steps == 4
    assert h.program_step_ms == round(statistics.median(t["unprofiled_step_ns"]) / 1e6, 4)
    plain = _records("serve_prefill_decode", tmp_path, with_timing=False)
    assert headline(aggregate_files([str(plain)]), [], 0).unit == "step"
