"""Mutations of records files (parse's JSON Lines, the original PyProf's dict lines), fed to prof and report:
malformed lines, a wrong type in each key, legacy dict lines of odd types, NaN and Infinity, hostile and 20 MB
names, deep nesting, a stream cut short."""
from __future__ import annotations

import json
import random
from pathlib import Path

from bench.fuzz.registry import Built, mutation, records_commands
from bench.fuzz.seeds import choose
from bench.fuzz.sqlite_markers import HOSTILE
from pyprof.record import END_PREFIX, HEADER_PREFIX, SIDE_PREFIX

_CACHE: dict[Path, list[bytes]] = {}
_ENDS: dict[Path, bytes] = {}  # parse's end line of each seed (none for the original PyProf's dict lines)
_HEADERS: dict[Path, bytes] = {}  # parse's header line of each seed (schema 3 on)
_SIDES: dict[Path, list[bytes]] = {}  # its side lines (schema 4 on): host time, memory

#: Every key parse writes, and values of other types than the writer's (issue 13 names layer, grid, args, api).
KEYS = ("kind", "kShortName", "kLongName", "kDuration", "start_ns", "end_ns", "pid", "tid", "device", "stream",
        "correlation_id", "grid", "block", "registers", "static_smem_bytes", "dynamic_smem_bytes", "smem_bytes",
        "est_occupancy_pct", "gpu", "gpu_props", "api", "api_start_ns", "api_end_ns", "bytes", "copy_kind",
        "layer", "trace", "reprMarkers", "marker", "seqMarker", "seqId", "subSeqId", "altSeqId", "dir",
        "recompute", "mod", "op", "args", "outputs", "callsite", "fwd", "ranges", "schema")
WRONG = (5, -1, 1.5, "text", "", None, True, [], {}, [1, "a", None], {"a": [1]}, [[[]]], 2 ** 70, ["x", 5],
         [{"type": 5}], [1, 2], "[1,2]", {"mod": 5, "op": {}, "args": 3})


def lines(rng: random.Random, seeds, legacy: bool = False) -> tuple[Path, list[bytes]]:
    """A seed's record lines (its header, side and end lines kept aside: the mutations change records, and _built
    puts them back). A records seed without parse's end line is refused (ValueError): every mutation of it would
    be a cut stream that its label does not say (seeds.whole_stream keeps such seeds out)."""
    src = choose(rng, seeds.legacy if legacy else seeds.records)
    if src not in _CACHE:
        ls = [line for line in src.read_bytes().splitlines() if line.strip()]
        if ls and ls[-1].startswith(END_PREFIX):
            _ENDS[src] = ls.pop()
        elif not legacy:
            raise ValueError(f"records seed {src} lacks parse's end line: a cut stream is rec.cut_short's alone")
        if ls and ls[0].startswith(HEADER_PREFIX):
            _HEADERS[src] = ls.pop(0)
        _SIDES[src] = [x for x in ls if x.startswith(SIDE_PREFIX)]
        _CACHE[src] = [x for x in ls if not x.startswith(SIDE_PREFIX)]
    return src, list(_CACHE[src])


def _built(rng, src, folder, detail, out: list[bytes], n_records: int | None = None, must_succeed=False,
           ended: bool = True) -> Built:
    path = folder / src.name
    end = [_ENDS[src]] if ended and src in _ENDS else []
    head = [_HEADERS[src]] if src in _HEADERS else []
    path.write_bytes(b"\n".join(head + out + _SIDES.get(src, []) + end) + b"\n")
    return Built(f"{src.name}: {detail}", records_commands(rng, str(path), n_records, must_succeed))


def _pick(rng, n: int) -> list[int]:
    return sorted(rng.sample(range(n), min(n, rng.choice((1, 1, 5, n)))))


@mutation("rec.malformed", stage="prof")
def malformed(rng, seeds, folder) -> Built:
    src, ls = lines(rng, seeds, legacy=rng.random() < 0.2)
    i = rng.randrange(len(ls))
    how = rng.choice(("cut", "garbage", "array", "number", "string", "null", "empty object", "binary",
                      "invalid utf8", "two on one line", "deep array", "unclosed", "bare word"))
    new = {"cut": ls[i][: rng.randrange(1, len(ls[i]))], "garbage": b"%%% not a record %%%", "array": b"[1, 2, 3]",
           "number": b"42", "string": b'"kernel"', "null": b"null", "empty object": b"{}",
           "binary": bytes(rng.randrange(256) for _ in range(64)).replace(b"\n", b" "),
           "invalid utf8": ls[i].replace(b'"kShortName":"', b'"kShortName":"\xff\xc3(', 1),
           "two on one line": ls[i] + ls[i], "deep array": b"[" * 100_000 + b"]" * 100_000,
           "unclosed": b'{"kShortName": "k', "bare word": b"kernel"}[how]
    ls[i] = new
    return _built(rng, src, folder, f"line {i + 1}: {how}", ls)


@mutation("rec.cut_short", stage="prof")
def cut_short(rng, seeds, folder) -> Built:
    """Records of a parse that did not finish: parse's end line missing, the last record perhaps cut mid-line."""
    src, ls = lines(rng, seeds)
    keep = rng.randrange(1, len(ls) + 1)
    out = ls[:keep]
    how = rng.choice(("end line dropped", "cut inside the last record"))
    if how != "end line dropped":
        out[-1] = out[-1][: rng.randrange(1, len(out[-1]))]
    return _built(rng, src, folder, f"{how} after {keep} of {len(ls)} records", out, ended=False)


@mutation("rec.wrong_type", stage="prof")
def wrong_type(rng, seeds, folder) -> Built:
    src, ls = lines(rng, seeds)
    key = rng.choice(KEYS + ("fwd.args", "args.item", "args.shape", "gpu_props.smCount", "fwd.op"))
    value = rng.choice(WRONG)
    idx = _pick(rng, len(ls))
    for i in idx:
        d = json.loads(ls[i])
        if key == "args.item":
            d["args"] = list(d.get("args") or []) + [value]
        elif key == "args.shape":
            d["args"] = [dict(a, shape=value) if isinstance(a, dict) else a for a in d.get("args") or []] or \
                [{"type": "tensor", "shape": value, "dtype": "float32"}]
        elif "." in key:
            outer, inner = key.split(".")
            sub = d.get(outer) if isinstance(d.get(outer), dict) else {}
            sub[inner] = value
            d[outer] = sub
        else:
            d[key] = value
        ls[i] = json.dumps(d).encode()
    return _built(rng, src, folder, f"{key} = {json.dumps(value)} in {len(idx)} records", ls)


@mutation("rec.side", stage="prof")
def side(rng, seeds, folder) -> Built:
    """A damaged side line (memory events, host time: schema 4): a wrong type in one of its keys, columns of
    different lengths, an unknown kind, or the line cut: one error naming the line, or read as before."""
    src, ls = lines(rng, seeds)
    sides = list(_SIDES.get(src, []))
    if not sides:  # a seed without side lines: give it one (a host line of one process)
        sides = [b'{"pyprof_side":"host","pid":1,"category":"runtime","start_ns":[0,10],"end_ns":[5,20]}']
    i = rng.randrange(len(sides))
    d = json.loads(sides[i])
    key = rng.choice([k for k in d if k != "pyprof_side"] + ["pyprof_side", "cut", "short column"])
    if key == "cut":
        new = sides[i][: rng.randrange(1, len(sides[i]))]
        detail = "cut"
    else:
        if key == "short column":
            lists = [k for k, v in d.items() if isinstance(v, list) and v]
            key = rng.choice(lists) if lists else "pyprof_side"
            d[key] = d[key][:-1] if key != "pyprof_side" else 7
            detail = f"{key} one short"
        else:
            value = rng.choice(WRONG + ("power", [None], [-1], [2 ** 70]))
            d[key] = value
            detail = f"{key} = {json.dumps(value)[:40]}"
        new = json.dumps(d).encode()
    sides[i] = new
    end = [_ENDS[src]] if src in _ENDS else []
    head = [_HEADERS[src]] if src in _HEADERS else []
    path = folder / src.name
    path.write_bytes(b"\n".join(head + ls + sides + end) + b"\n")
    return Built(f"{src.name}: side line {i + 1}: {detail}", records_commands(rng, str(path), None, False))


#: Values a Python-dict line can hold that JSON cannot, and ones of the wrong type (issue 13: 'mod': 5, a set).
LEGACY_ODD = ("5", "{1, 2}", "b'bytes'", "(1, 2)", "1j", "None", "10**100", "1e999", "-1e999", "set()",
              "frozenset()", "{'a': {1}}", "[" * 50_000 + "]" * 50_000, "'x' * 3", "Ellipsis", "...", "{5: 6}",
              "[{'type': 'tensor', 'shape': 5}]", "'str'", "True")


@mutation("rec.legacy_odd", stage="prof")
def legacy_odd(rng, seeds, folder) -> Built:
    src, ls = lines(rng, seeds, legacy=True)
    key = rng.choice(("mod", "op", "marker", "kShortName", "kDuration", "layer", "dir", "grid", "block", "seqId",
                      "tid", "device", "stream", "trace", "altSeqId", "subSeqId", "kLongName", "args", "whole line"))
    odd = rng.choice(LEGACY_ODD)
    idx = _pick(rng, len(ls))
    for i in idx:
        if key == "whole line":
            ls[i] = odd.encode()
            continue
        text = ls[i].decode()
        marker = f"'{key}': "
        at = text.find(marker)
        if at < 0:
            ls[i] = (text[:-1] + f", {marker}{odd}}}").encode()
        else:  # replace the value up to the next top-level key (values of these keys hold no "', '")
            end = text.find(", '", at + len(marker))
            ls[i] = (text[: at + len(marker)] + odd + (text[end:] if end > 0 else "}")).encode()
    return _built(rng, src, folder, f"legacy {key}: {odd[:40]} in {len(idx)} lines", ls)


@mutation("rec.nonfinite", stage="prof")
def nonfinite(rng, seeds, folder) -> Built:
    src, ls = lines(rng, seeds)
    token = rng.choice(("NaN", "Infinity", "-Infinity", "1e999", "-1e999"))
    key = rng.choice(("kDuration", "start_ns", "end_ns", "est_occupancy_pct", "grid", "block", "registers",
                      "bytes", "args.value", "args.shape", "gpu_props.clockRate", "device", "api_start_ns"))
    idx = _pick(rng, len(ls))
    for i in idx:
        d = json.loads(ls[i])
        if key in ("grid", "block", "args.shape"):
            v = ["@T@", 1, 1]
        else:
            v = "@T@"
        if key.startswith("args."):
            d["args"] = [{"type": "float", "value": v}] if key == "args.value" else \
                [{"type": "tensor", "shape": v, "dtype": "float32"}] + list(d.get("args") or [])
        elif key.startswith("gpu_props."):
            d["gpu_props"] = dict(d.get("gpu_props") or {}, clockRate=v)
        else:
            d[key] = v
        ls[i] = json.dumps(d).replace('"@T@"', token).encode()
    return _built(rng, src, folder, f"{token} in {key} of {len(idx)} records", ls)


@mutation("rec.hostile_name", stage="prof")
def hostile_name(rng, seeds, folder) -> Built:
    """Names with escapes and line breaks: prof's text formats must still print one line per record."""
    src, ls = lines(rng, seeds)
    name = rng.choice(HOSTILE)
    keys = rng.choice((("kShortName",), ("kLongName", "kShortName"), ("op",), ("layer",), ("mod", "op"),
                       ("callsite",), ("gpu",)))
    idx = _pick(rng, len(ls))
    for i in idx:
        d = json.loads(ls[i])
        for k in keys:
            d[k] = [name] if isinstance(d.get(k), list) else name
        ls[i] = json.dumps(d).encode()
    return _built(rng, src, folder, f"{'/'.join(keys)} = {name[:40]!r} in {len(idx)} records", ls,
                  n_records=len(ls), must_succeed=True)


@mutation("rec.huge_name", weight=0.1, stage="prof")
def huge_name(rng, seeds, folder) -> Built:
    """One record with a 20 MB kernel name: valid input, to be read in time linear in its size."""
    src, ls = lines(rng, seeds)
    i = rng.randrange(len(ls))
    d = json.loads(ls[i])
    key = rng.choice(("kLongName", "kShortName"))
    d[key] = "void k<" + "x" * 20_000_000 + ">()"
    ls[i] = json.dumps(d).encode()
    return _built(rng, src, folder, f"a 20 MB {key} on line {i + 1}", ls, n_records=len(ls), must_succeed=True)


@mutation("rec.deep", weight=0.5, stage="prof")
def deep(rng, seeds, folder) -> Built:
    src, ls = lines(rng, seeds)
    depth = rng.choice((1_000, 50_000, 300_000))
    key = rng.choice(("args", "fwd", "layer", "gpu_props", "marker", "outputs"))
    nest = "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
    idx = _pick(rng, len(ls))[:5]
    for i in idx:
        d = json.loads(ls[i])
        d[key] = "@D@"
        ls[i] = json.dumps(d).replace('"@D@"', nest).encode()
    return _built(rng, src, folder, f"{key} nested {depth} deep in {len(idx)} records", ls)


@mutation("rec.header", stage="prof")
def header(rng, seeds, folder) -> Built:
    """Parse's header line (schema 3) broken: a wrong type where the GPUs' properties or the schema are, a
    second header inside the records, or the header lost. Readers take it or refuse it in one line."""
    src, ls = lines(rng, seeds)
    if src not in _HEADERS:
        return _built(rng, src, folder, "no header line to break (an older schema)", ls)
    d = json.loads(_HEADERS[src])
    how = rng.choice(("schema", "gpus", "a device", "props", "a prop", "again", "lost"))
    gpus = d.get("gpus") or {"0": {}}
    dev = rng.choice(sorted(gpus))
    if how == "schema":
        d["schema"] = rng.choice(WRONG)
    elif how == "gpus":
        d["gpus"] = rng.choice(WRONG)
    elif how == "a device":
        gpus[dev] = rng.choice(WRONG)
    elif how == "props":
        gpus[dev] = {**(gpus[dev] if type(gpus[dev]) is dict else {}), "gpu_props": rng.choice(WRONG)}
    elif how == "a prop":
        props = (gpus[dev] or {}).get("gpu_props") or {}
        gpus[dev] = {**gpus[dev], "gpu_props": {**props, rng.choice(("smCount", "clockRate", "memoryBandwidth",
                                                                     "computeMajor")): rng.choice(WRONG)}}
    head = json.dumps(d).encode()
    if how == "again":
        ls.insert(rng.randrange(len(ls) + 1), head)
    path = folder / src.name
    end = [_ENDS[src]] if src in _ENDS else []
    path.write_bytes(b"\n".join(([] if how == "lost" else [head]) + ls + end) + b"\n")
    return Built(f"{src.name}: header line, {how}", records_commands(rng, str(path)))
