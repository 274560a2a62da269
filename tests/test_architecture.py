"""The package's shape (docs/architecture.md): imports follow the data flow capture (pyprof.nvtx) -> parse -> prof
-> report -> diff, no import cycle, and a later stage uses only an earlier stage's public names. Read from the source
with ast (every import, at module level or inside a function), so a violation fails here before a review."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The stages in data-flow order; a module may import its own stage, an earlier one and the shared modules. diff
#: compares two runs' prof aggregates and renders them with report's page: it comes after both; agent (pyprof mcp)
#: answers from all of them.
FLOW = ("nvtx", "parse", "prof", "report", "diff", "agent")
#: Modules every stage may import: what the stages share (the record's layout, errors, helpers, the fork helper,
#: the temporaries and signals).
SHARED = {"pyprof.common", "pyprof.cleanup", "pyprof.record", "pyprof.forked"}
#: The entry points above the stages: the umbrella command and ``pyprof.init``'s package, which import all.
ENTRY = {"pyprof", "pyprof.cli", "pyprof.__main__", "pyprof.run", "pyprof.run.cli", "pyprof.run.boot",
         "pyprof.run.boot.sitecustomize"}


def _module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(top: Path) -> dict[str, set[tuple[str, str | None]]]:
    """Per module of the package at ``top``: the (module, name) pairs it imports from the package; name is None
    for ``import a.b`` and for a module imported by ``from a import b``."""
    modules = {_module_name(p, top): p for p in top.rglob("*.py")}
    out: dict = {}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        found: set = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {(a.name, None) for a in node.names if a.name.split(".")[0] == top.name}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base.split(".")[0] != top.name:
                    continue
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.add((sub, None) if sub in modules else (base, a.name))
        out[mod] = found
    return out


def _stage(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOW else None


def _private(mod: str, name: str | None) -> bool:
    words = mod.split(".")[1:] + ([name] if name else [])
    return any(w.startswith("_") and not (w.startswith("__") and w.endswith("__")) for w in words)


def against_flow(graph: dict) -> list[str]:
    bad = []
    for mod, targets in graph.items():
        if mod in ENTRY:
            continue
        here = _stage(mod)
        for target, name in targets:
            there = _stage(target)
            if mod in SHARED and there is not None:
                bad.append(f"{mod} (shared by every stage) imports {target}")
            elif here is not None and there is not None and FLOW.index(there) > FLOW.index(here):
                bad.append(f"{mod} ({here}) imports {target}{'.' + name if name else ''} ({there}, later)")
    return bad


def private_across(graph: dict) -> list[str]:
    bad = []
    for mod, targets in graph.items():
        for target, name in targets:
            if _stage(target) != _stage(mod) and _private(target, name):
                bad.append(f"{mod} imports {target}{'.' + name if name else ''}, private to its stage")
    return bad


def cycles(graph: dict) -> list[list[str]]:
    """The import cycles among modules (strongly connected components of more than one module, or a module
    importing itself), by Tarjan's algorithm. A package's ``__init__`` importing its own submodules is how a
    package exposes them, and those submodules importing the package back is the cycle flagged."""
    edges = {m: {t for t, _ in ts if t in graph and t != m} for m, ts in graph.items()}
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    found: list = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict:
    return imports(ROOT / "pyprof")


def test_imports_follow_the_data_flow(graph):
    assert against_flow(graph) == []


def test_no_stage_uses_another_stages_private_names(graph):
    assert private_across(graph) == []


def test_no_import_cycle(graph):
    # Imports of a package by its own submodules (``from pyprof.prof import registry`` in a formula module)
    # name the package's __init__, which imports the formulas: the package level is left out, modules only.
    modules_only = {m: {(t, n) for t, n in ts if not (m.startswith(t + "."))} for m, ts in graph.items()}
    assert cycles(modules_only) == []


def test_the_checks_find_what_they_look_for(tmp_path):
    """Each check flags a planted violation (so a check that cannot fail is caught here)."""
    top = tmp_path / "pyprof"
    for folder in ("parse", "prof", "report"):
        (top / folder).mkdir(parents=True)
        (top / folder / "__init__.py").write_text("")
    (top / "__init__.py").write_text("")
    (top / "record.py").write_text("")
    (top / "parse" / "reader.py").write_text("from pyprof.prof.rows import rows\n")  # against the flow
    (top / "prof" / "rows.py").write_text("from pyprof.parse.write.writer import _template\nfrom . import tables\n")
    (top / "prof" / "tables.py").write_text("def f():\n    from pyprof.prof import rows\n")  # a cycle, in a function
    (top / "parse" / "writer.py").write_text("from pyprof.record import Record\n")
    (top / "report" / "page.py").write_text("from pyprof.prof._hidden import x\nfrom ..prof import rows\n")
    g = imports(top)
    assert g["pyprof.prof.rows"] == {("pyprof.parse.write.writer", "_template"), ("pyprof.prof.tables", None)}
    assert g["pyprof.report.page"] == {("pyprof.prof._hidden", "x"), ("pyprof.prof.rows", None)}
    assert against_flow(g) == ["pyprof.parse.reader (parse) imports pyprof.prof.rows.rows (prof, later)"]
    assert sorted(private_across(g)) == [
        "pyprof.prof.rows imports pyprof.parse.write.writer._template, private to its stage",
        "pyprof.report.page imports pyprof.prof._hidden.x, private to its stage"]
    assert cycles(g) == [["pyprof.prof.rows", "pyprof.prof.tables"]]


def modules_not_in(doc: str, top: Path) -> list[str]:
    """The modules of the package at ``top`` (Python and C files, paths relative to it) that ``doc`` does not name
    in backquotes; ``__main__.py`` files, two lines of ``python -m`` each, are left out."""
    found = sorted(p for p in top.rglob("*") if p.suffix in (".py", ".c", ".h") and p.name != "__main__.py"
                   and "__pycache__" not in p.parts)
    return [str(p.relative_to(top)) for p in found if f"`{p.relative_to(top).as_posix()}`" not in doc]


def test_architecture_doc_names_every_module():
    missing = modules_not_in((ROOT / "docs" / "architecture.md").read_text(), ROOT / "pyprof")
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


def test_the_module_check_finds_a_module_left_out(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "sub/named.py", "sub/left_out.py", "sub/_kernel.c"):
        (pkg / name).write_text("")
    doc = "- `__init__.py`: the package.\n- `sub/named.py`: named.\n- `sub/_kernel.c`: a kernel.\n"
    assert modules_not_in(doc, pkg) == ["sub/left_out.py"]
