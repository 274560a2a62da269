"""The real seed files every mutation starts from, made ready once per run in a cache folder.

Small ones only, so that ten thousand cases fit in well under an hour on two cores: corpus Nsight Systems exports
under 2.5 MB, the nvprof files, the committed captures, the external Kineto traces under 2 MB of JSON, and records
files made by running ``python -m pyprof.parse`` on a few of them (the code under test makes them: a seed that it
cannot parse cleanly is left out and said so). Legacy dict lines are the records written as Python dicts, the
original PyProf's format.
"""
from __future__ import annotations

import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pyprof.record import END_PREFIX, HEADER_PREFIX, RECORD_SCHEMA, SIDE_PREFIX, read_lines

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PYPROF_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus"
DATA = ROOT / "tests" / "data"

NSYS = [CORPUS / "nsys" / n for n in (
    "nsys2021_mordred_report1.sqlite", "nsys2022.2_pipit_saxpy_mpi.sqlite", "nsys2022.4_gpu4_vectoradd_streams.sqlite",
    "nsys2023.3_lts_la.sqlite", "nsys2024.6_no_cuda.sqlite", "nsys2025.5_flameox_cudagraph.sqlite",
    "nsys2026.2_h100_2gpu_torch_nccl.sqlite")] + [
    DATA / "nsys" / "pyprof" / "lenet.sqlite.xz", DATA / "nsys" / "emit_nvtx" / "lenet.sqlite.xz",
    DATA / "nsys" / "pyprof" / "custom_function.sqlite.xz", DATA / "nsys" / "pyprof" / "custom_module.sqlite.xz",
    DATA / "nsys" / "pyprof" / "profile_window.sqlite.xz",
    CORPUS / "external" / "nsys2025.1_nvfuser_crossentropy.sqlite.xz"]
NVPROF = sorted((CORPUS / "nvprof").glob("*")) if (CORPUS / "nvprof").is_dir() else []
KINETO = [DATA / "kineto" / n for n in (
    "custom_function.pt.trace.json.gz", "custom_module.pt.trace.json.gz", "compiled.pt.trace.json.gz",
    "lenet.pt.trace.json.gz", "user_annotation.pt.trace.json.gz")] + [
    CORPUS / "external" / "hta_trace_filter_sampled_rank-0.json.gz",
    CORPUS / "external" / "hta_trace_filter_sampled_rank-1.json.gz"]
NOT_PROFILES = sorted((CORPUS / "not-a-profile").glob("*")) if (CORPUS / "not-a-profile").is_dir() else []
#: Exports whose records become the records seeds (each stage's own captures, one of each reader).
RECORDS_FROM = ("lenet.sqlite", "emit_nvtx_lenet.sqlite", "lenet.pt.trace.json", "custom_module.pt.trace.json",
                "nvprof_v11_torch_emit_nvtx.prof", "nsys2023.3_lts_la.sqlite")


@dataclass
class Seeds:
    """Paths of the ready seed files, by kind; everything lives under ``folder``."""

    folder: Path
    nsys: list[Path] = field(default_factory=list)  # plain .sqlite
    nvprof: list[Path] = field(default_factory=list)
    kineto: list[Path] = field(default_factory=list)  # plain .json
    records: list[Path] = field(default_factory=list)  # parse's JSON Lines
    legacy: list[Path] = field(default_factory=list)  # the original PyProf's dict lines
    other: list[Path] = field(default_factory=list)  # not a profile at all
    skipped: list[str] = field(default_factory=list)  # seeds parse could not read cleanly (with why)

    def exports(self) -> list[Path]:
        return self.nsys + self.nvprof + self.kineto


def _plain_name(src: Path) -> str:
    name = src.name
    if src.parent.name == "emit_nvtx":
        name = "emit_nvtx_" + name
    for ext in (".xz", ".gz"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def _decompressed(src: Path, dest: Path) -> None:
    opener = lzma.open if src.suffix == ".xz" else gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as f, open(dest, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)


def parse_env(root: Path = ROOT) -> dict:
    """The environment the commands run in: this checkout's pyprof first, numpy's BLAS on one thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OPENBLAS_NUM_THREADS"] = "1"
    env.pop("PYTHONWARNINGS", None)
    return env


def prepare(folder: Path, log=print, nsys=None, nvprof=None, kineto=None, records_from=RECORDS_FROM,
            not_profiles=None) -> Seeds:
    """Decompress the seed exports into ``folder`` and make the records seeds; return them by kind. The lists
    default to the bench's seeds (the tests pass a few small ones).

    A seed missing on disk (no shared corpus here) or one that ``pyprof.parse`` does not parse with exit 0 and
    strict JSON is left out, and listed in ``Seeds.skipped``."""
    folder.mkdir(parents=True, exist_ok=True)
    seeds = Seeds(folder)
    kinds = (("nsys", NSYS if nsys is None else nsys), ("nvprof", NVPROF if nvprof is None else nvprof),
             ("kineto", KINETO if kineto is None else kineto))
    for kind, srcs in kinds:
        for src in srcs:
            if not src.exists():
                seeds.skipped.append(f"{src}: missing")
                continue
            dest = folder / _plain_name(src)
            if not dest.exists():
                _decompressed(src, dest)
            records = dest.with_name(dest.name + ".dict")
            why = _parse_cleanly(dest, records)
            if why:
                seeds.skipped.append(f"{src}: {why}")
                continue
            getattr(seeds, kind).append(dest)
            if dest.name in records_from:
                seeds.records.append(records)
                legacy = records.with_name(records.name.replace(".dict", ".legacy"))
                _write_legacy(records, legacy)
                seeds.legacy.append(legacy)
    for src in NOT_PROFILES if not_profiles is None else not_profiles:
        dest = folder / ("notprofile_" + src.name)
        if not dest.exists():
            shutil.copyfile(src, dest)
        seeds.other.append(dest)
    for s in seeds.skipped:
        log(f"fuzz seeds: left out {s}")
    return seeds


def _parse_cleanly(path: Path, records: Path) -> str | None:
    """None when ``records`` holds parse's whole output for ``path`` (made now, or kept from an earlier run in a
    reused --seeds-dir); else why the seed is left out. A kept file is made again unless it is a whole stream of
    this schema: a records seed cut short (an older pyprof's, a run stopped while it wrote) would make every
    records mutation of it a cut stream, where a cut stream must be the deliberate, labelled rec.cut_short."""
    if records.exists():
        if whole_stream(records) is None:
            return None
        records.unlink()
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", "-q", str(path), "-o", str(records)],
                       capture_output=True, text=True, env=parse_env(), cwd=path.parent, timeout=120)
    if p.returncode != 0:
        records.unlink(missing_ok=True)
        return f"parse exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:200]}"
    try:
        with open(records, encoding="utf-8") as f:
            for line in f:
                json.loads(line, parse_constant=_no_constant)
    except ValueError as e:
        records.unlink()
        return f"parse output is not strict JSON: {e}"
    why = whole_stream(records)
    if why is not None:
        records.unlink()
        return f"parse output is not a whole stream: {why}"
    return None


def whole_stream(records: Path) -> str | None:
    """None when ``records`` is a whole records stream of this pyprof's schema: parse's header line first, its end
    line last; else what is wrong."""
    with open(records, "rb") as f:
        first = f.readline()
        f.seek(max(0, records.stat().st_size - 4096))
        tail = [line for line in f.read().split(b"\n") if line.strip()]
    if not first.startswith(HEADER_PREFIX):
        return "no header line"
    try:
        schema = json.loads(first).get("schema")
    except ValueError:
        return "a header line that is not JSON"
    if schema != RECORD_SCHEMA:
        return f"schema {schema}, not {RECORD_SCHEMA}"
    if not tail or not tail[-1].startswith(END_PREFIX):
        return "no end line: the stream was cut short"
    return None


def _no_constant(name: str):
    raise ValueError(f"{name} in JSON")


def _write_legacy(records: Path, dest: Path) -> None:
    """The original PyProf's format: one Python dict per line (``repr``), its keys only."""
    keep = ("kShortName", "kDuration", "layer", "trace", "reprMarkers", "marker", "seqMarker", "seqId",
            "subSeqId", "altSeqId", "dir", "mod", "op", "tid", "device", "stream", "grid", "block", "kLongName")
    with open(records, encoding="utf-8") as f, open(dest, "w", encoding="utf-8") as out:
        for d in read_lines(f):  # parse's header and end lines skipped (the original format has neither)
            legacy = {k: d.get(k) for k in keep}
            # The original kept an op's arguments in a Python-dict string in ``marker``.
            if d.get("op"):
                legacy["marker"] = [repr({"mod": (d.get("mod") or [""])[0], "op": d["op"][0],
                                          "args": d.get("args") or []})]
            else:
                legacy["marker"] = []
            legacy["grid"] = tuple(legacy["grid"] or ())
            legacy["block"] = tuple(legacy["block"] or ())
            out.write(repr(legacy) + "\n")


def choose(rng, pool: list, key=lambda p: p):
    """A random member of ``pool``, one of its smaller half three times in four: small seeds keep a case near
    a command's start-up time, so that thousands of cases fit in an hour."""
    if len(pool) > 2 and rng.random() < 0.75:
        pool = sorted(pool, key=lambda e: (key(e).stat().st_size, str(key(e))))[: (len(pool) + 1) // 2]
    return rng.choice(pool)


def count_lines(path: Path) -> int:
    """Records of a records file: its non-blank lines but parse's header, side and end lines."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip() and not line.startswith((END_PREFIX, HEADER_PREFIX, SIDE_PREFIX)))
