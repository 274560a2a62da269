"""Scale a real Nsight Systems export up by replication, to measure parse speed at size.

    python bench/scale_export.py IN.sqlite OUT.sqlite --kernels 1000000

Copies IN, then appends copies of every activity, launch-call and NVTX row, each copy shifted in time
past the previous one and with correlation ids shifted past the largest one in the file, so that joins
and range nesting stay exactly as in the original. The autograd numbers in PyTorch's range texts (``seq``,
``stashed seq``, ``op_id`` and the producers in ``input_op_ids``) are shifted the same way: each copy
has its own, so a backward node links to the forward op of its own copy, never to one of an earlier copy
(which a parse would find in its cache). Other tables are kept once.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sqlite3
import sys
import time

REPLICATED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
# PyTorch's autograd numbers in an emit_nvtx text; an input made by no op is "(0,-1)", and stays so.
_SEQ = re.compile(r"(, (?:stashed )?seq = )(\d+)")
_OP_ID = re.compile(r"(, op_id = )(\d+)")
_PRODUCER = re.compile(r"\((\d+),")


def _renumbered(text, seq_shift: int, op_shift: int):
    """``text`` with its autograd sequence numbers and op ids moved by the shifts (other texts as they are)."""
    if not isinstance(text, str) or " = " not in text:
        return text
    text = _SEQ.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + seq_shift}", text)
    text = _OP_ID.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + op_shift}", text)
    head, sep, inputs = text.partition(", input_op_ids = ")
    if not sep:
        return text
    return head + sep + _PRODUCER.sub(lambda m: f"({int(m.group(1)) + op_shift if m.group(1) != '0' else 0},",
                                      inputs)


def _largest(db: sqlite3.Connection, pattern: re.Pattern) -> int:
    """The largest number ``pattern`` finds in the push/pop range texts (0 when none)."""
    top = 0
    for (text,) in db.execute("SELECT text FROM NVTX_EVENTS WHERE text LIKE '% = %'"):
        for m in pattern.finditer(text if isinstance(text, str) else ""):
            top = max(top, int(m.group(2)))
    return top


def scale(src: str, dst: str, kernels: int) -> int:
    """Write ``dst``: ``src`` with its rows replicated until it holds at least ``kernels`` kernels.
    Returns the number of kernels written."""
    shutil.copyfile(src, dst)
    db = sqlite3.connect(dst)
    tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    present = [t for t in REPLICATED if t in tables]
    n0 = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    if n0 == 0:
        raise SystemExit(f"{src}: no kernels to replicate")
    copies = math.ceil(kernels / n0)
    lo = min(db.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 0 for t in present)
    hi = max(db.execute(f"SELECT max(coalesce(end, start)) FROM {t}").fetchone()[0] or 0 for t in present)
    span_ns = hi - lo + 1_000_000  # a 1 ms gap between copies
    corr_span = 1 + max(db.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0
                        for t in present if t != "NVTX_EVENTS")
    renumber = "NVTX_EVENTS" in present and "text" in {r[1] for r in db.execute("PRAGMA table_info('NVTX_EVENTS')")}
    seq_span = 1 + _largest(db, _SEQ) if renumber else 0
    op_span = 1 + _largest(db, _OP_ID) if renumber else 0
    db.create_function("renumbered", 3, _renumbered, deterministic=True)
    for t in present:
        cols = [r[1] for r in db.execute(f"PRAGMA table_info('{t}')")]
        top = db.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0

        def expr(c: str) -> str:
            if c in ("start", "end"):
                return f'"{c}" + :shift'
            if c == "correlationId":
                return f'"{c}" + :corr'
            if c == "text" and t == "NVTX_EVENTS":
                return f'renumbered("{c}", :seq, :op)'
            return f'"{c}"'

        sql = (f"INSERT INTO {t} ({', '.join(chr(34) + c + chr(34) for c in cols)}) "
               f"SELECT {', '.join(expr(c) for c in cols)} FROM {t} WHERE rowid <= {top}")
        for i in range(1, copies):
            db.execute(sql, {"shift": i * span_ns, "corr": i * corr_span, "seq": i * seq_span, "op": i * op_span})
    db.commit()
    db.execute("VACUUM")
    db.close()
    return n0 * copies


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--kernels", type=int, default=1_000_000)
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    n = scale(a.src, a.dst, a.kernels)
    print(f"kernels written: {n}", file=sys.stderr)
    print(f"file size MB: {os.path.getsize(a.dst) / 2**20:.0f}", file=sys.stderr)
    print(f"seconds: {time.perf_counter() - t0:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
