"""``pyprof mcp``: the answers (pyprof.agent.answers) as the tools of a Model Context Protocol server on stdio,
with the official Python SDK (the ``agent`` extra: ``mcp>=2.3,<3``). A tool's error (a file that is not a
profile, an unknown view) is its answer, one line, marked as an error; the server goes on."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from pyprof.agent import answers
from pyprof.common import InputError, UsageError
from pyprof.prof.source_lines import SourceText

PROG = "pyprof mcp"
#: What the server tells a client it is for (the SDK sends it at initialisation).
INSTRUCTIONS = (Path(__file__).with_name("SKILL.md").read_text(encoding="utf-8")
                if Path(__file__).with_name("SKILL.md").is_file() else "")


def server(source_roots: list[str] | None = None):
    """The MCP server (an ``MCPServer`` of the SDK) over one set of analysed inputs. Raises UsageError without the
    SDK."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise UsageError('pyprof mcp needs the MCP SDK 2.x: pip install "mcp>=2.3,<3" (the agent extra)') from None
    from pyprof import __version__

    profiles = answers.Profiles(source_roots)
    # the SDK logs a failed call at INFO on stderr: a client reads the answer, which says the same
    app = MCPServer("pyprof", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def guarded(fn, *args, **kwargs) -> dict[str, Any]:
        try:
            return fn(profiles, *args, **kwargs)
        except (InputError, UsageError) as e:
            raise ToolError(str(e)) from None  # the model reads the one line; any other exception is a bug

    @app.tool(structured_output=True)
    def headline(path: str) -> dict[str, Any]:
        """The headline of a profile (an Nsight Systems SQLite export, a PyTorch-profiler trace) or of pyprof's
        records file: step time (the program's own beside the captured one), GPU busy, GPU time, the share with
        modelled FLOPs, and the top ops, lines and findings. Start here."""
        return guarded(answers.headline, path)

    @app.tool(structured_output=True)
    def view(path: str, name: str, top: int = 10) -> dict[str, Any]:
        """The first `top` rows of one view of a profile or records file: overview (per step), operators,
        operators_shapes, kernels, lines, layers, idle, host, memory, recommendations, workers, ranks
        (docs/views.md). Rows as `pyprof prof --view NAME --jsonl` prints them, with the view's notes."""
        return guarded(answers.view, path, name, top)

    @app.tool(structured_output=True)
    def findings(path: str, top: int = 5) -> dict[str, Any]:
        """The findings of a profile or records file, most at stake first: each rule's evidence (the numbers it
        rests on), the time it would save and what to do."""
        return guarded(answers.findings, path, top)

    @app.tool(structured_output=True)
    def kernels(path: str, op: str = "", line: str = "", top: int = 20) -> dict[str, Any]:
        """The GPU kernels of one op (`linear`, or `linear (bprop)` for its backward alone) or of one line of the
        user's code (`train.py:31`), with duration, FLOPs, bytes, TFLOP/s, roofline % and Tensor Core use, and
        each kernel's record index."""
        return guarded(answers.kernels, path, op or None, line or None, top)

    @app.tool(structured_output=True)
    def diff(base: str, new: str, by: str = "op", top: int = 10) -> dict[str, Any]:
        """How run `new` differs from run `base` per step (each a profile or records file): the step time's
        change split into kernel, copy and idle time, the ops (or kernels, lines, layers: `by`) that changed
        most, and what only one run ran."""
        return guarded(answers.diff, base, new, by, top)

    return app


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Serve pyprof's answers to a coding agent over the Model Context Protocol (stdio): "
        "the tools headline, view, findings, kernels and diff read the profile or records file each call names, "
        "and nothing else (docs/agents.md).")
    p.add_argument("--source-root", action="append", default=[], metavar="DIR",
                   help="a folder whose .py files the lines view may quote (default: none is read); repeatable")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from pyprof.common import run_command

    args = build_parser().parse_args(argv)
    return run_command(PROG, lambda: _serve(args))


def _serve(args) -> int:
    for r in args.source_root:
        SourceText([r])  # a root that is not a folder: one line, before the server starts
    server(args.source_root).run("stdio")
    return 0
